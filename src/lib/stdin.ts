/** Reading a command's stdin whole, stoppable by an interrupt (`fnr eval -`, `fnr sink`). */
import {buffer} from 'node:stream/consumers'

/** All of stdin; an interrupt stops the reading (and closes stdin, so the process can end). */
export async function readStdin(stdin: NodeJS.ReadableStream, signal: AbortSignal | undefined): Promise<Buffer> {
  if (!signal) return buffer(stdin)
  signal.throwIfAborted()
  let onAbort: (() => void) | undefined
  const aborted = new Promise<never>((_resolve, reject) => {
    onAbort = () => {
      ;(stdin as NodeJS.ReadableStream & {destroy?: () => void}).destroy?.()
      reject(signal.reason)
    }
    signal.addEventListener('abort', onAbort, {once: true})
  })
  try {
    return await Promise.race([buffer(stdin), aborted])
  } finally {
    signal.removeEventListener('abort', onAbort!)
  }
}
