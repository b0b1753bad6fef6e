/**
 * The base class of every fnr command. It renders errors the same way everywhere: one line on
 * stderr ("fnr: <message>"), an exit code chosen by the error's kind (see errors.ts), and a stack
 * trace only when FNR_DEBUG is set or --log-level is 4 or more.
 */
import {Command, Errors} from '@oclif/core'

import {FnrError, firstLine, toFnrError} from '../errors.js'

export abstract class FnrCommand extends Command {
  /** Set by commands that accept --log-level, so errors can show stacks when it is high. */
  protected verbosity = 0

  protected async catch(err: Error & {exitCode?: number; oclif?: {exit?: number}}): Promise<void> {
    // oclif's own exits (this.exit(), --help, --version) pass straight through.
    if (err instanceof Errors.ExitError) throw err
    if (isOclifParseError(err)) {
      process.stderr.write(`fnr: ${firstLine(err.message)}\n`)
      process.stderr.write(`See more help with --help\n`)
      process.exitCode = 2
      return
    }

    const fnrError = err instanceof FnrError ? err : toFnrError(err)
    process.stderr.write(`fnr: ${fnrError.message}\n`)
    if (this.verbosity >= 4 || process.env.FNR_DEBUG) {
      process.stderr.write(`${(fnrError.cause instanceof Error ? fnrError.cause : fnrError).stack ?? ''}\n`)
    }
    process.exitCode = fnrError.exitCode
  }
}

function isOclifParseError(err: Error): boolean {
  const name = err.constructor?.name ?? ''
  return (
    name.endsWith('FlagError') ||
    name.endsWith('ArgInvalidOptionError') ||
    name === 'RequiredArgsError' ||
    name === 'UnexpectedArgsError' ||
    name === 'NonExistentFlagsError' ||
    name === 'FailedFlagValidationError' ||
    name === 'CLIParseError' ||
    (err instanceof Errors.CLIError && /flag|argument|Unexpected argument/i.test(err.message) && !(err instanceof FnrError))
  )
}
