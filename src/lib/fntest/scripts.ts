/**
 * `fnr test`: kpt's case scripts. `.expected/setup.sh` runs before the case and `exec.sh` instead
 * of the evaluation, `teardown.sh` after it, each with bash in the case's scratch copy (kpt's
 * runner does the same). A `kpt` on their PATH points at fnr: a small shell script in a temporary
 * folder that turns `kpt fn eval ARGS` into `fnr eval ARGS` and `kpt fn render ARGS` into
 * `fnr render ARGS` (the arguments unchanged; the run's exec config flags added unless the script
 * gives its own), `kpt fn source|sink ARGS` into `fnr source|sink ARGS`, and refuses every other
 * kpt command with exit code 127 and a one-line message.
 */
import {chmod, mkdtemp, rm, writeFile} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'

import {quote} from 'shell-quote'

import {DEFAULT_IMAGE_PREFIX} from '../config/image-ref.js'
import type {ExecPaths} from '../config/embedded.js'
import {FnrError} from '../errors.js'
import {ProcessLauncher} from '../process/launcher.js'
import {runFunctionProcess} from '../process/run.js'

/** Exit code of the shim for a kpt command it does not map (a shell's "command not found"). */
export const SHIM_REFUSED_EXIT = 127

/** How to start fnr: node and bin/run.js of this installation (the command passes its own). */
export function defaultFnrCommand(): string[] {
  return [process.execPath, fileURLToPath(new URL('../../../bin/run.js', import.meta.url))]
}

export interface KptShim {
  /** The folder holding `kpt`, to put first on PATH. */
  dir: string
  remove(): Promise<void>
}

/** The text of the `kpt` script: the mapping, then the refusal. */
export function kptShimScript(fnrCommand: readonly string[], execPaths: ExecPaths & {defaultImagePrefix: string}): string {
  const fnr = quote([...fnrCommand])
  const execFlags: string[] = []
  if (!execPaths.embedded) execFlags.push('--config', path.resolve(execPaths.configPath), '--functions', path.resolve(execPaths.functionsDir))
  if (execPaths.defaultImagePrefix !== DEFAULT_IMAGE_PREFIX) execFlags.push('--default-image-prefix', execPaths.defaultImagePrefix)
  const lines = [
    '#!/bin/sh',
    '# Written by `fnr test` for kpt e2e scripts: `kpt fn eval|render|source|sink ARGS` runs `fnr eval|render|source|sink ARGS`.',
    'if [ "$1" = fn ] && { [ "$2" = eval ] || [ "$2" = render ]; }; then',
    '  sub=$2',
    '  shift 2',
  ]
  if (execFlags.length > 0) {
    lines.push(
      '  own=',
      '  for a in "$@"; do',
      '    case "$a" in',
      '      --) break ;;',
      '      --config|--config=*|--functions|--functions=*|--default-image-prefix|--default-image-prefix=*) own=1 ;;',
      '    esac',
      '  done',
      `  if [ -z "$own" ]; then exec ${fnr} "$sub" ${quote(execFlags)} "$@"; fi`,
    )
  }
  lines.push(
    `  exec ${fnr} "$sub" "$@"`,
    'fi',
    '# kpt fn source and sink read and write files only: no function, so no exec config.',
    'if [ "$1" = fn ] && { [ "$2" = source ] || [ "$2" = sink ]; }; then',
    '  sub=$2',
    '  shift 2',
    `  exec ${fnr} "$sub" "$@"`,
    'fi',
    `echo "kpt (fnr test): 'kpt $*' is not available here: only 'kpt fn eval', 'render', 'source' and 'sink' run, through fnr" >&2`,
    `exit ${SHIM_REFUSED_EXIT}`,
    '',
  )
  return lines.join('\n')
}

export async function createKptShim(fnrCommand: readonly string[], execPaths: ExecPaths & {defaultImagePrefix: string}): Promise<KptShim> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'fnr-test-kpt-'))
  const file = path.join(dir, 'kpt')
  await writeFile(file, kptShimScript(fnrCommand, execPaths))
  await chmod(file, 0o755)
  return {dir, remove: () => rm(dir, {recursive: true, force: true})}
}

export interface ScriptOutcome {
  stdout: string
  stderr: string
  /** The script's exit code; 128 + the signal's number when a signal ended it. */
  exitCode: number
}

/**
 * Runs `bash SCRIPT` in cwd with the shim first on PATH. The script's whole process group is
 * killed at the deadline (FnrError DeadlineExceeded) or when signal aborts (FnrError Cancelled).
 */
export async function runCaseScript(
  script: string,
  options: {cwd: string; shim: KptShim; deadline: number; signal?: AbortSignal; maxOutputBytes: number},
): Promise<ScriptOutcome> {
  const env: NodeJS.ProcessEnv = {...process.env, PATH: `${options.shim.dir}${path.delimiter}${process.env.PATH ?? ''}`}
  // FNR_CONTENT_TYPE=json asks this fnr test for JSON (oclif's --json); the script's kpt commands
  // print what kpt prints.
  delete env.FNR_CONTENT_TYPE
  // The script's own launcher: its processes, swept when it ends, before the next script runs.
  const launcher = ProcessLauncher.forCommand()
  try {
    const r = await runFunctionProcess({
      launcher,
      command: 'bash',
      args: [script],
      input: new Uint8Array(),
      env,
      cwd: options.cwd,
      deadline: options.deadline,
      signal: options.signal,
      maxStdoutBytes: options.maxOutputBytes,
      maxStderrBytes: options.maxOutputBytes,
      label: path.basename(script),
    })
    const exitCode = r.exitCode ?? 128 + (r.signal ? (os.constants.signals[r.signal] ?? 0) : 0)
    return {stdout: r.stdout.toString('utf8'), stderr: r.stderr.toString('utf8'), exitCode}
  } catch (err) {
    if (err instanceof FnrError && err.kind === 'FunctionFailed' && err.details.startFailed) {
      throw new FnrError('NotFound', `cannot run ${path.basename(script)}: bash is not installed (kpt's case scripts need it)`, {cause: err})
    }
    throw err
  } finally {
    await launcher.close()
  }
}
