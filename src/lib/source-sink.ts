/**
 * The two ends of a kpt pipe, `fnr source` and `fnr sink`, with `kpt fn source` and `kpt fn sink`'s
 * command lines and output (so `fnr source DIR | fnr eval - … | fnr sink OUT` needs no kpt):
 *
 * - source: DIR (default `.`; a single file works too) read as `kpt fn source` reads it (every
 *   KRM file, subpackages, `.krmignore`; documents that are not KRM pass through) and written to
 *   stdout as a wrapped ResourceList with the path and index annotations, or with `-o unwrap` as
 *   plain YAML documents without them. `--fn-config FILE` adds FILE's one object as the list's
 *   functionConfig, annotated as kpt annotates it.
 * - sink: a ResourceList (or plain YAML documents) on stdin written into a new directory DIR, each
 *   item to the file its path annotation names. DIR must not exist; the files appear all at once
 *   (resourcelist/sink.ts). Where kpt differs on purpose: an empty stdin (the command before it in
 *   the pipe died) is an error and writes nothing, where kpt makes an empty DIR that looks like a
 *   package; an explicitly empty list (`items: []`) still makes the empty DIR, as in kpt.
 */
import {FnrError} from './errors.js'
import * as rl from './resourcelist/index.js'
import {readStdin} from './stdin.js'

export const SOURCE_OUTPUTS = ['stdout', 'unwrap'] as const

export interface SourceCommandOptions {
  /** kpt's positional arguments: at most one, the package (default `.`). */
  args: readonly string[]
  /** `stdout` (a wrapped ResourceList) or `unwrap` (plain YAML documents). */
  output: string
  /** --fn-config FILE */
  fnConfigPath?: string
  signal?: AbortSignal
}

/** `fnr source`: the package's ResourceList, written to stdout. */
export async function runSource(options: SourceCommandOptions, io: {stdout: NodeJS.WritableStream}): Promise<void> {
  io.stdout.write(await sourceText(options))
}

/** The text `fnr source` writes. */
async function sourceText(options: SourceCommandOptions): Promise<string> {
  if (!(SOURCE_OUTPUTS as readonly string[]).includes(options.output)) {
    throw usage(`invalid input for --output flag ${JSON.stringify(options.output)}, must be "stdout" or "unwrap"`)
  }
  if (options.args.length > 1) throw usage(`accepts at most 1 arg(s), received ${options.args.length}`)
  const dir = options.args[0] ?? '.'
  await rl.checkPackageArgument(dir)
  const functionConfig = options.fnConfigPath === undefined ? undefined : await readSourceFunctionConfig(options.fnConfigPath, options.signal)
  const list = await rl.readPackage([dir], {requireKrm: false, signal: options.signal})
  // kpt writes no functionConfig with unwrap (its writer only adds one to a wrapped list).
  if (options.output === 'unwrap') return rl.unwrapToYaml(list)
  return rl.stringifyResourceList(list.items, functionConfig ? {functionConfig} : {})
}

/** kpt reads --fn-config with its package reader: exactly one object, annotated like the items. */
async function readSourceFunctionConfig(file: string, signal: AbortSignal | undefined) {
  await rl.checkPackageArgument(file)
  const list = await rl.readPackage([file], {requireKrm: false, signal})
  if (list.items.length !== 1) throw new FnrError('InvalidArgument', `expected exactly 1 functionConfig, found ${list.items.length}`)
  return list.items[0]!
}

export interface SinkCommandOptions {
  /** kpt's positional arguments: the first is the new directory (kpt ignores the rest). */
  args: readonly string[]
  signal?: AbortSignal
}

/** `fnr sink`: stdin's resources into the new directory; what was written. */
export async function runSink(options: SinkCommandOptions, io: {stdin: NodeJS.ReadableStream}): Promise<rl.WriteReport & {dir: string}> {
  const dir = options.args[0]
  if (dir === undefined) throw usage('requires at least 1 arg(s), only received 0')
  // Checked before stdin is read, as kpt does: a pipe into an existing DIR fails at once.
  await rl.checkSinkTarget(dir)
  const bytes = await readStdin(io.stdin, options.signal)
  if (bytes.length === 0) {
    throw new FnrError('InvalidArgument', `stdin is empty: nothing written to ${dir} (the command before fnr sink gave no output; an empty package is written only from an explicit "items: []")`)
  }
  const list = await rl.parseResourceListInterruptible(bytes, {origin: 'stdin', signal: options.signal})
  return {dir, ...(await rl.sinkToDirectory(list, dir, options.signal))}
}

function usage(message: string): FnrError {
  return new FnrError('Usage', message, {details: {commandLine: true}})
}
