/**
 * Reading a configuration file given by a flag (exec config, --pod-cache-config, the listener's TLS
 * files, the registry auth file and CA files) without ever blocking or reading without end:
 *
 *   - only a regular file, after following symlinks (a mounted ConfigMap or Secret is a symlink to
 *     one): a FIFO would block the start until something writes to it, and a device such as
 *     /dev/zero never ends. The file is opened non-blocking and checked on the open descriptor, so
 *     it cannot be swapped between the check and the read;
 *   - at most MAX_CONFIG_FILE_BYTES (a file that grows while it is read is cut off at the limit and
 *     refused too): Kubernetes caps a ConfigMap or Secret at 1 MiB, so a bigger file is a mistake;
 *   - every problem is one FnrError('Config') line naming the file (and, through the caller's
 *     label, the flag): "no such file (ENOENT)", "it is a directory (EISDIR)", "not a regular file
 *     (it is a FIFO)", "it is 700 MiB, more than the limit of 4 MiB for a config file", ...
 */
import {constants, type Stats} from 'node:fs'
import {open, type FileHandle} from 'node:fs/promises'

import {FnrError} from './errors.js'

/** The largest config file fnr reads (4 MiB; a Kubernetes ConfigMap or Secret holds at most 1 MiB). */
export const MAX_CONFIG_FILE_BYTES = 4 * 1024 * 1024

/** Why a file cannot be used: an errno-like code and the words for it. */
export interface FileProblem {
  /** ENOENT, EACCES, EISDIR, ENOTREG (not a regular file), EFBIG (over the limit), ELOOP, ... */
  code: string
  reason: string
}

export interface ReadConfigFileOptions {
  /** What the file is, starting the error line: `${label}: ${reason}` (e.g. "--tls-cert-file /x cannot be read"). */
  label: string
  /** The size limit (default MAX_CONFIG_FILE_BYTES). */
  maxBytes?: number
  /** Another wording of the error line, from the problem (default `${label}: ${reason}`). */
  message?: (problem: FileProblem) => string
}

/** A config file that cannot be used: FnrError('Config') with the problem's code and reason. */
export class ConfigFileError extends FnrError {
  readonly code: string
  readonly reason: string

  constructor(
    readonly file: string,
    problem: FileProblem,
    message: string,
    cause?: unknown,
  ) {
    super('Config', message, {cause, details: {file, code: problem.code}})
    this.code = problem.code
    this.reason = problem.reason
  }
}

const ERRNO_WORDS: Record<string, string> = {
  ENOENT: 'no such file',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  EISDIR: 'it is a directory',
  ENOTDIR: 'a part of the path is not a directory',
  ELOOP: 'too many levels of symbolic links',
  ENAMETOOLONG: 'the name is too long',
  ENXIO: 'not a regular file (no such device or address; a socket?)',
}

function errnoProblem(err: unknown): FileProblem {
  const code = (err as NodeJS.ErrnoException).code ?? 'EIO'
  const words = ERRNO_WORDS[code] ?? ((err as Error).message ?? String(err)).split('\n', 1)[0]!
  return {code, reason: `${words} (${code})`}
}

function kindOf(st: Stats): string {
  if (st.isFIFO()) return 'a FIFO'
  if (st.isCharacterDevice()) return 'a character device'
  if (st.isBlockDevice()) return 'a block device'
  if (st.isSocket()) return 'a socket'
  return 'not a file'
}

function size(bytes: number): string {
  if (bytes >= 1024 * 1024) return `${Math.round((bytes / (1024 * 1024)) * 10) / 10} MiB`
  if (bytes >= 1024) return `${Math.round((bytes / 1024) * 10) / 10} KiB`
  return `${bytes} bytes`
}

/** The problem with a file's type or size, or undefined when it is a regular file within the limit. */
export function fileProblem(st: Stats, maxBytes = MAX_CONFIG_FILE_BYTES): FileProblem | undefined {
  if (st.isDirectory()) return {code: 'EISDIR', reason: 'it is a directory (EISDIR)'}
  if (!st.isFile()) return {code: 'ENOTREG', reason: `not a regular file (it is ${kindOf(st)})`}
  if (st.size > maxBytes) return tooLarge(st.size, maxBytes)
  return undefined
}

function tooLarge(bytes: number | undefined, maxBytes: number): FileProblem {
  return {code: 'EFBIG', reason: `it is ${bytes === undefined ? 'more' : size(bytes)}, more than the limit of ${size(maxBytes)} for a config file`}
}

/** Reads a regular config file (following symlinks) of at most `maxBytes`; ConfigFileError otherwise. */
export async function readConfigFile(file: string, options: ReadConfigFileOptions): Promise<Buffer> {
  const maxBytes = options.maxBytes ?? MAX_CONFIG_FILE_BYTES
  const fail = (problem: FileProblem, cause?: unknown): never => {
    throw new ConfigFileError(file, problem, options.message ? options.message(problem) : `${options.label}: ${problem.reason}`, cause)
  }
  let handle: FileHandle
  try {
    // O_NONBLOCK: opening a FIFO without a writer returns at once instead of waiting for one.
    handle = await open(file, constants.O_RDONLY | constants.O_NONBLOCK)
  } catch (err) {
    return fail(errnoProblem(err), err)
  }
  try {
    let st: Stats
    try {
      st = await handle.stat()
    } catch (err) {
      return fail(errnoProblem(err), err)
    }
    const problem = fileProblem(st, maxBytes)
    if (problem) return fail(problem)
    // The size can change under us (and /proc files say 0): read up to one byte past the limit.
    const chunks: Buffer[] = []
    let total = 0
    for (;;) {
      const buffer = Buffer.allocUnsafe(Math.min(64 * 1024, maxBytes + 1 - total))
      let bytesRead: number
      try {
        ;({bytesRead} = await handle.read(buffer, 0, buffer.length, null))
      } catch (err) {
        return fail(errnoProblem(err), err)
      }
      if (bytesRead === 0) break
      chunks.push(buffer.subarray(0, bytesRead))
      total += bytesRead
      if (total > maxBytes) return fail(tooLarge(undefined, maxBytes))
    }
    return Buffer.concat(chunks, total)
  } finally {
    await handle.close().catch(() => undefined)
  }
}
