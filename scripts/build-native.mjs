#!/usr/bin/env node
// Builds the native spawn helper (native/fnr-spawn.c) into dist/native/fnr-spawn with the system C
// compiler ($CC, else cc): part of `npm run build` (setup.mjs build()). Where no compiler exists it
// says so once and the build goes on: servers then start functions through the Node spawner
// (docs/process.md "The native spawn helper"). A compiler that fails on the source fails the build.
//
//   node scripts/build-native.mjs [--out FILE] [--static]
//
// --static links it statically and strips it (the wrapper-server folder, which runs in images of any libc).
import {spawnSync} from 'node:child_process'
import {existsSync, mkdirSync, renameSync, rmSync, statSync} from 'node:fs'
import path from 'node:path'
import {fileURLToPath, pathToFileURL} from 'node:url'
import {parseArgs} from 'node:util'

export const ROOT = fileURLToPath(new URL('..', import.meta.url))
export const SOURCE = path.join(ROOT, 'native', 'fnr-spawn.c')
export const DEFAULT_OUT = path.join(ROOT, 'dist', 'native', 'fnr-spawn')
// -z now: every symbol is bound at start-up. Lazily bound, each function's child (a fork of the
// helper, native/fnr-spawn.c) bound setsid, dup2, chdir and execve again, writing to a page it
// shared with the helper: a copy per start (~30 us of the child's CPU per call, measured).
export const CFLAGS = ['-std=c11', '-O2', '-Wall', '-Wextra', '-Werror', '-pthread', '-Wl,-z,now']

function mtime(p) {
  try {
    return statSync(p).mtimeMs
  } catch {
    return 0
  }
}

/** The compiler to use ($CC, else cc), or undefined when there is none. */
export function compiler(env = process.env) {
  for (const cc of [env.CC, 'cc', 'gcc', 'clang'].filter(Boolean)) {
    if (spawnSync(cc, ['--version'], {stdio: 'ignore'}).error === undefined) return cc
  }
  return undefined
}

/**
 * Compiles the helper to `out` unless it is newer than its source. Returns the path, or undefined
 * (said on stderr) when no compiler exists. Throws when compiling fails.
 */
export function buildNative({out = DEFAULT_OUT, staticLink = false, quiet = false} = {}) {
  if (mtime(out) > mtime(SOURCE) && mtime(out) > mtime(fileURLToPath(import.meta.url))) return out
  const cc = compiler()
  if (!cc) {
    if (!quiet) process.stderr.write('build: no C compiler (cc) found: the native spawn helper is not built; servers start functions through the Node spawner\n')
    return undefined
  }
  mkdirSync(path.dirname(out), {recursive: true})
  // Built beside its place and renamed over it: a running server or test may be starting it.
  const tmp = `${out}.${process.pid}.tmp`
  const r = spawnSync(cc, [...CFLAGS, ...(staticLink ? ['-static', '-s'] : []), '-o', tmp, SOURCE], {stdio: ['ignore', 'inherit', 'inherit']})
  if (r.status !== 0) {
    rmSync(tmp, {force: true})
    throw new Error(`build: ${cc} failed to compile ${path.relative(ROOT, SOURCE)} (exit ${r.status ?? r.signal})`)
  }
  renameSync(tmp, out)
  return out
}

if (process.argv[1] && pathToFileURL(path.resolve(process.argv[1])).href === import.meta.url) {
  const {values} = parseArgs({options: {out: {type: 'string'}, static: {type: 'boolean'}}})
  try {
    const out = buildNative({out: values.out ? path.resolve(values.out) : DEFAULT_OUT, staticLink: values.static === true})
    if (out && !existsSync(out)) process.exit(1)
  } catch (err) {
    process.stderr.write(`${err.message}\n`)
    process.exit(1)
  }
}
