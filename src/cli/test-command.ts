/**
 * `fnr test`'s flags (plain specs, as the other commands) and the run as the command does it:
 * console output, the summary line, the JSON summary, --junit, and the exit code.
 */
import os from 'node:os'

import {resolveExecPaths} from '../lib/config/embedded.js'
import {FnrError} from '../lib/errors.js'
import {EXEC_FLAG_SPECS, type FlagSpecs, type FlagValue} from '../lib/flags/spec.js'
import {writeJunit} from '../lib/fntest/junit.js'
import {formatCaseResult, formatSummary, jsonSummary, type JsonSummary} from '../lib/fntest/report.js'
import {runFnTest, type FnTestOptions} from '../lib/fntest/run.js'

/** Exit code when the run worked but at least one case failed (setup problems use the FnrError codes). */
export const EXIT_CASES_FAILED = 1

export const TEST_FLAG_SPECS = {
  exec: {kind: 'string', summary: 'Executable function and its arguments, e.g. "./fn --flag" (no shell); overrides the cases\' own.', exclusive: ['image']},
  image: {kind: 'string', summary: 'Function image, resolved through the exec config (or run by --runner); overrides the cases\' own.', exclusive: ['exec']},
  runner: {kind: 'string', summary: 'Evaluate each case\'s image through a running function runner (fnr serve, or Porch\'s) at HOST:PORT over gRPC, e.g. to test a shipped image through the pod runtime.', exclusive: ['exec']},
  'runner-ca-file': {kind: 'string', summary: 'Dial --runner with TLS, trusting the CAs in this PEM file (default plaintext, as porch-server).'},
  update: {kind: 'boolean', summary: 'Rewrite the expectations (diff.patch, resourcelist.yaml, results.yaml, exitCode) from what the function did.', default: false},
  junit: {kind: 'string', summary: 'Also write a JUnit XML report to this file.'},
  // Non-greedy, so `--filter x testdata` leaves the folder a folder.
  filter: {kind: 'string', multiple: true, multipleNonGreedy: true, summary: 'Run only the cases whose name contains this text (or matches it, with * wildcards); repeatable.'},
  concurrency: {kind: 'integer', summary: 'Cases run at once.', default: Math.max(1, Math.min(4, os.availableParallelism())), min: 1},
  timeout: {kind: 'duration', summary: 'Per-case timeout: the function is killed and the case fails.', default: 60_000, defaultHelp: '1m'},
  'max-output-size': {kind: 'integer', summary: 'Largest function output accepted, in bytes.', default: 256 * 1024 * 1024, min: 1024},
  'image-pull-policy': {
    kind: 'string',
    summary: "kpt's image pull policy (Always, IfNotPresent, Never): accepted for kpt's harnesses; fnr's exec runtime pulls no images, so all three run the same.",
  },
  ...EXEC_FLAG_SPECS,
} satisfies FlagSpecs

export interface TestCommandOptions extends FnTestOptions {
  /** --json (oclif's flag, src/cli/command.ts): the per-case lines go to stderr, stdout gets the JSON summary. */
  json: boolean
  junit?: string
}

export function testOptionsFromFlags(values: Record<string, FlagValue>, given: ReadonlySet<string>, roots: string[]): Omit<TestCommandOptions, 'json'> {
  const str = (name: string): string | undefined => values[name] as string | undefined
  if (roots.length === 0) throw new FnrError('Usage', 'give the folder of test cases, e.g. fnr test testdata --exec ./my-fn')
  if (str('runner-ca-file') && !str('runner')) throw new FnrError('Usage', '--runner-ca-file needs --runner')
  return {
    roots,
    exec: str('exec'),
    image: str('image'),
    update: values.update as boolean,
    junit: str('junit'),
    filter: (values.filter as string[] | undefined) ?? [],
    concurrency: values.concurrency as number,
    timeoutMs: values.timeout as number,
    maxOutputBytes: values['max-output-size'] as number,
    ...(str('image-pull-policy') !== undefined ? {imagePullPolicy: str('image-pull-policy')} : {}),
    ...(str('runner') ? {runner: {address: str('runner')!, ...(str('runner-ca-file') ? {caFile: str('runner-ca-file')} : {})}} : {}),
    execPaths: {
      ...resolveExecPaths(str('config')!, str('functions')!, given.has('config'), given.has('functions'), {cli: true}),
      defaultImagePrefix: str('default-image-prefix')!,
    },
  }
}

export interface TestIO {
  stdout: NodeJS.WritableStream
  stderr: NodeJS.WritableStream
}

/** Exit code of a run a signal stopped: 128 + the signal's number (130 SIGINT, 143 SIGTERM). */
export function interruptedExitCode(signal: string): number {
  const n = (os.constants.signals as Record<string, number | undefined>)[signal]
  return n === undefined ? 130 : 128 + n
}

/**
 * Runs the cases and reports: the console (on stderr with --json), JUnit, and the JSON summary
 * (the command returns it; oclif prints it with --json). The exit code is 0 when every case
 * passed, was updated or was skipped, 1 when a case failed or could not run, 128 + the signal's
 * number when SIGINT/SIGTERM stopped the run (the report, JUnit and the summary are still made).
 */
export async function runTestCommand(options: TestCommandOptions, io: TestIO): Promise<{exitCode: number; summary: JsonSummary}> {
  const human = options.json ? io.stderr : io.stdout
  const run = await runFnTest(options, (r) => human.write(formatCaseResult(r)))
  human.write(formatSummary(run))
  if (options.junit) await writeJunit(options.junit, run)
  const exitCode = run.interrupted
    ? interruptedExitCode(run.interrupted)
    : run.results.some((r) => r.status === 'failed' || r.status === 'error')
      ? EXIT_CASES_FAILED
      : 0
  return {exitCode, summary: jsonSummary(run)}
}
