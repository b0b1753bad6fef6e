/**
 * The base class of every fnr command. It renders errors the same way everywhere (renderError:
 * one line on stderr, an exit code chosen by the error's kind; with --json also the error as one
 * JSON object on stdout, errorJson) and turns flag errors into Usage errors.
 *
 * --json is oclif's: a command whose output is data sets `static enableJsonFlag = true` and
 * returns the data from run(); oclif prints it as JSON when --json is given (or
 * FNR_CONTENT_TYPE=json), and the command prints its text form only when !this.jsonEnabled().
 */
import {Command, Errors, type Interfaces} from '@oclif/core'

import {FnrError} from '../lib/errors.js'
import {parseLogFormat, setLogFormat} from '../lib/telemetry/log.js'
import {jsonFlag, logFormatFlag} from './flags.js'
import {errorJson, renderError, type ErrorForm} from './render-error.js'
import {flagHint} from '../lib/flags/suggest.js'

// The shapes oclif's parse() is generic over (not exported from @oclif/core's entry point).
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type FlagOutput = {[name: string]: any}
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type ArgOutput = {[name: string]: any}

/** oclif's parse error message as one line. */
function oneLineParseMessage(text: string): string {
  const lines = text.split('\n').map((l) => l.trim()).filter((l) => l !== '' && !/^See more help/.test(l))
  // oclif lists several errors under a heading (both of two exclusive flags): the first one, as the fast path reports it.
  if (/^The following errors occurred:?$/.test(lines[0] ?? '') && lines.length > 1) lines.splice(0, lines.length, lines[1]!)
  // "Missing 1 required arg:" is followed by the arg's help and notes: keep its name only.
  const message = /^Missing \d+ required args?:?$/.test(lines[0] ?? '') ? `${lines[0]!.replace(/:?$/, ':')} ${(lines[1] ?? '').split(/\s+/)[0]}` : lines.join(': ')
  // "Missing 1 required arg:: image" and the like: one colon.
  return message.replace(/:: /g, ': ')
}

export abstract class FnrCommand extends Command {
  /** Set by commands that accept --log-level, so errors can show stacks when it is high. */
  protected verbosity = 0

  /** Flag and argument errors become Usage errors (exit 2, one line). */
  protected async parse<F extends FlagOutput, B extends FlagOutput, A extends ArgOutput>(
    options?: Interfaces.Input<F, B, A>,
    argv?: string[],
  ): Promise<Interfaces.ParserOutput<F, B, A>> {
    try {
      const parsed = await super.parse(options, argv)
      const logFormat = (parsed.flags as FlagOutput)['log-format'] as string | undefined
      if (logFormat !== undefined) setLogFormat(parseLogFormat(logFormat, '--log-format'))
      return parsed
    } catch (err) {
      if (err instanceof Errors.ExitError) throw err
      throw this.parseFailure(err as Error, options?.flags ?? {}, argv ?? this.argv)
    }
  }

  /** oclif's parse error as a one-line Usage error, naming an unknown flag or a flag without its value as typed. */
  private parseFailure(err: Error, flags: Record<string, unknown>, args: readonly string[]): FnrError {
    let message = oneLineParseMessage(err.message)
    const unknown = /^Nonexistent flags?: (\S+)/.exec(message)
    const known = [...Object.keys(flags), ...(this.ctor.enableJsonFlag ? ['json'] : [])]
    const unknownFlag = unknown ? unknown[1]!.replace(/,$/, '') : undefined
    if (unknownFlag !== undefined) message = `Nonexistent flag: ${unknownFlag}${flagHint(unknownFlag, known)}`
    // oclif names a flag that ended the command line without its value by its long name
    const missing = /^Flag --([\w-]+) expects a value/.exec(message)
    const char = missing ? (flags[missing[1]!] as {char?: string} | undefined)?.char : undefined
    const missingValue = missing ? (char !== undefined && args.at(-1) === `-${char}` ? `-${char}` : `--${missing[1]}`) : undefined
    return new FnrError('Usage', message, {cause: err, details: {commandLine: true, ...(unknownFlag === undefined ? {} : {unknownFlag}), ...(missingValue === undefined ? {} : {missingValue})}})
  }

  /** Commands that log (they have --log-level) take --log-format too; commands with JSON output, --json. */
  static get baseFlags(): Interfaces.FlagInput {
    return {
      ...(this.enableJsonFlag ? {json: jsonFlag} : {}),
      ...(this.flags && 'log-level' in this.flags ? {'log-format': logFormatFlag} : {}),
    }
  }

  /**
   * Every failure ends here: the stderr line and the exit code (`exitCode`, when given, wins: an
   * interrupt's 130/143, src/cli/interrupt.ts); with --json, the error as JSON on stdout too.
   */
  protected async catch(err: Error & {exitCode?: number; oclif?: {exit?: number}}, exitCode?: number): Promise<void> {
    // oclif's own exits (this.exit(), --help, --version) pass straight through.
    if (err instanceof Errors.ExitError) throw err
    const rendered = renderError(err, this.verbosity, process.stderr, this.errorForm())
    const code = exitCode ?? rendered
    process.exitCode = code
    if (this.jsonEnabled()) this.logJson(this.toErrorJson(err, code))
  }

  /**
   * How this command reports failures: fnr's form; the kpt-compatible commands (eval, render)
   * report as kpt does unless asked otherwise (render-error.ts errorFormFor).
   */
  protected errorForm(): ErrorForm {
    return 'fnr'
  }

  /** `{"error": {kind, message, exitCode}}`, beside the report the error carries (render-error.ts). */
  protected toErrorJson(err: unknown, exitCode?: number): ReturnType<typeof errorJson> {
    return errorJson(err, exitCode)
  }
}
