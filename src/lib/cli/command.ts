/**
 * The base class of every fnr command. It renders errors the same way everywhere: one line on
 * stderr ("fnr: <message>"), an exit code chosen by the error's kind (see errors.ts), and a stack
 * trace only when FNR_DEBUG is set or --log-level is 4 or more.
 */
import {Command, Errors, type Interfaces} from '@oclif/core'

import {FnrError, firstLine, toFnrError} from '../errors.js'

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
      return await super.parse(options, argv)
    } catch (err) {
      if (err instanceof Errors.ExitError) throw err
      const message = (err as Error).message.split('\n').map((l) => l.trim()).filter((l) => l !== '' && !/^See more help/.test(l)).join(': ')
      throw new FnrError('Usage', message, {cause: err})
    }
  }

  protected async catch(err: Error & {exitCode?: number; oclif?: {exit?: number}}): Promise<void> {
    // oclif's own exits (this.exit(), --help, --version) pass straight through.
    if (err instanceof Errors.ExitError) throw err
    const fnrError = err instanceof FnrError ? err : toFnrError(err)
    process.stderr.write(`fnr: ${firstLine(fnrError.message, 2000)}${fnrError.kind === 'Usage' ? ' (see --help)' : ''}\n`)
    if (this.verbosity >= 4 || process.env.FNR_DEBUG) {
      process.stderr.write(`${(fnrError.cause instanceof Error ? fnrError.cause : fnrError).stack ?? ''}\n`)
    }
    process.exitCode = fnrError.exitCode
  }
}
