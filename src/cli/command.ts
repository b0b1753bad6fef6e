/**
 * The base class of every fnr command. It renders errors the same way everywhere (renderError:
 * one line on stderr, an exit code chosen by the error's kind) and turns flag errors into Usage
 * errors.
 */
import {Command, Errors, type Interfaces} from '@oclif/core'

import {FnrError} from '../lib/errors.js'
import {parseLogFormat, setLogFormat} from '../lib/telemetry/log.js'
import {logFormatFlag} from './flags.js'
import {renderError} from './render-error.js'
import {flagHint} from '../lib/flags/suggest.js'

// The shapes oclif's parse() is generic over (not exported from @oclif/core's entry point).
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type FlagOutput = {[name: string]: any}
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type ArgOutput = {[name: string]: any}

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
      const lines = (err as Error).message.split('\n').map((l) => l.trim()).filter((l) => l !== '' && !/^See more help/.test(l))
      // "Missing 1 required arg:" is followed by the arg's help and notes: keep its name only.
      let message = /^Missing \d+ required args?:?$/.test(lines[0] ?? '') ? `${lines[0]!.replace(/:?$/, ':')} ${(lines[1] ?? '').split(/\s+/)[0]}` : lines.join(': ')
      // "Missing 1 required arg:: image" and the like: one colon.
      message = message.replace(/:: /g, ': ')
      const unknown = /^Nonexistent flags?: (\S+)/.exec(message)
      if (unknown) message = `Nonexistent flag: ${unknown[1]!.replace(/,$/, '')}${flagHint(unknown[1]!, Object.keys(options?.flags ?? {}))}`
      throw new FnrError('Usage', message, {cause: err})
    }
  }

  /** Commands that log (they have --log-level) take --log-format too. */
  static get baseFlags(): Interfaces.FlagInput {
    return this.flags && 'log-level' in this.flags ? {'log-format': logFormatFlag} : {}
  }

  protected async catch(err: Error & {exitCode?: number; oclif?: {exit?: number}}): Promise<void> {
    // oclif's own exits (this.exit(), --help, --version) pass straight through.
    if (err instanceof Errors.ExitError) throw err
    process.exitCode = renderError(err, this.verbosity)
  }
}
