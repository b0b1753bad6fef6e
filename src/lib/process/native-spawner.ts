/**
 * The native spawn helper (native/fnr-spawn.c): where it is, how the runner starts it and how a
 * call is asked of it. spawner.ts runs it with the same ProcessSpawner as the Node spawner: the
 * helper answers with the Node spawner's messages (spawner-process.ts), in Node's own framing of
 * the IPC channel, so the runner receives the function's descriptors through Node's public API
 * (docs/process.md "The native spawn helper").
 *
 * Why: Node starts a child with fork(), copying the parent's page tables (tens of MiB), also from
 * the small Node spawner, and waits for it; the helper starts it from a spawn thread with a
 * vfork-style clone that copies nothing, while its main thread serves other calls, and holds
 * ~1 MiB instead of the Node spawner's ~16 MiB.
 */
import {existsSync} from 'node:fs'
import path from 'node:path'
import {fileURLToPath} from 'node:url'

import {SPAWNER_MODE_ENV, type LaunchSpec} from './spawner-process.js'

/** The helper's file name, in dist/native/ (npm run build) or beside a single executable. */
export const NATIVE_HELPER_NAME = 'fnr-spawn'

/** Set to a path: the helper to run (an image that keeps it elsewhere); set to `none`: no helper. */
export const NATIVE_HELPER_ENV = 'FNR_SPAWN_HELPER'

/** Where the helper would be, first the one that exists (or the first place looked, when none does). */
export function nativeHelperCandidates(env: NodeJS.ProcessEnv = process.env): string[] {
  const explicit = env[NATIVE_HELPER_ENV]
  if (explicit === 'none') return []
  if (explicit) return [explicit]
  const out: string[] = []
  // A single executable (the packaged wrapper-server) carries it in its own folder. Run through
  // its dynamic loader, argv0 is the executable.
  out.push(path.join(path.dirname(process.argv0.includes('/') ? process.argv0 : process.execPath), NATIVE_HELPER_NAME))
  try {
    // Built: dist/lib/process/native-spawner.js -> dist/native/. From sources (tsx):
    // src/lib/process/native-spawner.ts -> dist/native/ of the same checkout.
    out.unshift(fileURLToPath(new URL(`../../native/${NATIVE_HELPER_NAME}`, import.meta.url)), fileURLToPath(new URL(`../../../dist/native/${NATIVE_HELPER_NAME}`, import.meta.url)))
  } catch {
    // no module URL (a bundle without one)
  }
  return out
}

/** The helper's path when it is there, else undefined. */
export function nativeHelperPath(env: NodeJS.ProcessEnv = process.env): string | undefined {
  return nativeHelperCandidates(env).find((p) => existsSync(p))
}

/** How the runner starts the helper (ProcessSpawner's command): with Node's IPC channel, nothing else. */
export function nativeSpawnerCommand(): {execPath: string; args: string[]; env: NodeJS.ProcessEnv} {
  const helper = nativeHelperPath()
  // A missing helper fails to start (ENOENT), and the runner falls back at once. The mode variable
  // tells it from a function in ps and /proc, as it does the Node spawner.
  return {execPath: helper ?? nativeHelperCandidates()[0] ?? NATIVE_HELPER_NAME, args: [], env: {[SPAWNER_MODE_ENV]: '1'}}
}

/** Node's own check for strings handed to the kernel (spawn throws the same). */
function noNul(value: string, what: string): string {
  if (value.includes('\0')) {
    throw Object.assign(new TypeError(`The argument '${what}' must be a string without null bytes. Received ${JSON.stringify(value)}`), {code: 'ERR_INVALID_ARG_VALUE'})
  }
  return value
}

/**
 * The pipe size the helper is asked for when a call's input is larger than a pipe's default (64
 * KiB): its stdin's and stdout's pipes hold this much. Through 64 KiB pipes a 5 MiB call took ~10 %
 * more of the runner's CPU and time than through socketpairs (more wake-ups: a read or write per
 * 64 KiB, each after the function's turn); at 256 KiB it is back to theirs (docs/process.md). Only
 * large calls get it: the kernel counts every pipe's size against its user (pipe-user-pages-soft,
 * 64 MiB), past which new pipes of that user get 8 KiB, and calls that hang hold their pipes.
 */
export const LARGE_INPUT_PIPE_BYTES = 256 * 1024

/**
 * A spawn request for the helper: `b` is base64 of NUL-terminated strings: the working directory
 * ('' for the runner's), the command, the argument count, the arguments (argv[0], the command,
 * first, as Node passes it) and the environment's NAME=value strings (Node's order: the object's).
 * Throws, as Node's spawn does, on a NUL byte in any of them.
 */
export function nativeRequest(id: number, spec: LaunchSpec): {t: 'spawn'; id: number; b: string; s?: number} {
  const parts: string[] = [noNul(spec.cwd ?? '', 'options.cwd'), noNul(spec.command, 'file'), String(spec.args.length + 1), spec.command]
  spec.args.forEach((a, i) => parts.push(noNul(a, `args[${i}]`)))
  for (const [k, v] of Object.entries(spec.env)) {
    if (v !== undefined) parts.push(noNul(`${k}=${v}`, 'options.env'))
  }
  parts.push('')
  const b = Buffer.from(parts.join('\0')).toString('base64')
  // `s`: larger stdin and stdout pipes for a large input (LARGE_INPUT_PIPE_BYTES).
  return (spec.inputBytes ?? 0) > 64 * 1024 ? {t: 'spawn', id, b, s: LARGE_INPUT_PIPE_BYTES} : {t: 'spawn', id, b}
}
