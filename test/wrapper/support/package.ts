/**
 * The packaged wrapper folder for tests: built once per test run by scripts/package-wrapper.mjs
 * (which skips the build when no input changed and serialises concurrent builds), then copied
 * with `cp -a` into the test's own temp dir, as the init container copies it into the pod's
 * emptyDir. The copy keeps a test safe from another run replacing build/wrapper-server.
 */
import {spawn, spawnSync} from 'node:child_process'
import {readFileSync} from 'node:fs'
import path from 'node:path'

import {REPO_ROOT} from '../../support/serve.js'

export const PACKAGE_SCRIPT = path.join(REPO_ROOT, 'scripts', 'package-wrapper.mjs')
export const PACKAGED_DIR = path.join(REPO_ROOT, 'build', 'wrapper-server')
/** Generous: a cold build takes about 5 s here, much longer on a busy 2-core machine. */
export const PACKAGE_TIMEOUT_MS = 10 * 60_000

export interface BuildInfo {
  version: string
  node: string
  interpreter: string
  rpath: string
  mountPoint: string
  libraries: Array<{soname: string; from: string}>
  totalBytes: number
  /** node's startup variables renamed in the packaged copy ("NODE_OPTIONS=>FNRW_OPTIONS"). */
  renamedEnv: string[]
  files: Array<{path: string; bytes: number; sha256: string}>
}

let building: Promise<string> | undefined

/** Builds build/wrapper-server if needed (once per process); resolves with its path. */
export function packagedFolder(): Promise<string> {
  building ??= new Promise<string>((resolve, reject) => {
    const child = spawn(process.execPath, [PACKAGE_SCRIPT], {cwd: REPO_ROOT, stdio: ['ignore', 'ignore', 'pipe']})
    let err = ''
    child.stderr.on('data', (c: Buffer) => (err += c.toString()))
    child.on('error', reject)
    child.on('close', (code) => (code === 0 ? resolve(PACKAGED_DIR) : reject(new Error(`package-wrapper failed (exit ${code}):\n${err}`))))
  })
  return building
}

/** `cp -a FOLDER/. DEST` (what the init container of a function pod does). */
export function copyFolder(folder: string, dest: string): string {
  const r = spawnSync('cp', ['-a', `${folder}/.`, dest], {encoding: 'utf8'})
  if (r.status !== 0) throw new Error(`cp -a ${folder} ${dest} failed: ${r.stderr}`)
  return dest
}

export function readBuildInfo(folder: string): BuildInfo {
  return JSON.parse(readFileSync(path.join(folder, 'build-info.json'), 'utf8')) as BuildInfo
}
