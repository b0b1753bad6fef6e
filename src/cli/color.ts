/**
 * Colour on a terminal: kpt's console tags ([RUNNING], [PASS], [FAIL], [error], [warning]) are
 * coloured when stderr is a TTY, unless NO_COLOR is set (https://no-color.org) or --no-color is
 * given. Pipes and files (CI logs, kpt-compatible comparisons) get the plain bytes.
 */
const CODES: Array<[RegExp, string]> = [
  [/^\[RUNNING\]/gm, '\u001B[36m[RUNNING]\u001B[0m'],
  [/^\[PASS\]/gm, '\u001B[32m[PASS]\u001B[0m'],
  [/^\[FAIL\]/gm, '\u001B[31m[FAIL]\u001B[0m'],
  [/^(\s+)\[error\]/gm, '$1\u001B[31m[error]\u001B[0m'],
  [/^(\s+)\[warning\]/gm, '$1\u001B[33m[warning]\u001B[0m'],
  [/^fnr: /gm, '\u001B[31mfnr:\u001B[0m '],
]

export function colorEnabled(stream: NodeJS.WritableStream & {isTTY?: boolean}, flag: boolean, env: NodeJS.ProcessEnv = process.env): boolean {
  return flag && stream.isTTY === true && !env.NO_COLOR && env.TERM !== 'dumb'
}

export function colorize(text: string): string {
  let out = text
  for (const [re, replacement] of CODES) out = out.replace(re, replacement)
  return out
}

/** The stream itself, or one that colours what is written to it. */
export function consoleStream(stream: NodeJS.WritableStream & {isTTY?: boolean}, enabled: boolean): NodeJS.WritableStream {
  if (!enabled) return stream
  return new Proxy(stream, {
    get(target, prop, receiver) {
      if (prop === 'write') {
        return (chunk: unknown, ...rest: unknown[]) =>
          (target.write as (...a: unknown[]) => boolean).call(target, typeof chunk === 'string' ? colorize(chunk) : chunk, ...rest)
      }
      const v = Reflect.get(target, prop, receiver) as unknown
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v
    },
  })
}
