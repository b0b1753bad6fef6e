/**
 * Compatibility with the command lines Porch's runner accepts (Go's flag package), so existing
 * Deployments work unchanged:
 *   - "-port=9445" (one dash) means "--port=9445";
 *   - a bare boolean flag means true, and "--flag=false" works;
 *   - durations are Go durations ("30m", "1h30m", "500ms").
 * Go stops parsing at "--flag false" and silently ignores every later flag (an upstream bug); fnr
 * instead reads a following "true"/"false" as the flag's value.
 */

const GO_BOOL = new Map<string, boolean>([
  ['1', true], ['t', true], ['T', true], ['true', true], ['TRUE', true], ['True', true],
  ['0', false], ['f', false], ['F', false], ['false', false], ['FALSE', false], ['False', false],
])

export function parseGoBool(value: string): boolean | undefined {
  return GO_BOOL.get(value)
}

export function normaliseGoStyleArgs(argv: readonly string[], booleanFlags: ReadonlySet<string>, knownFlags: ReadonlySet<string>): string[] {
  const out: string[] = []
  for (let i = 0; i < argv.length; i++) {
    let arg = argv[i]!
    if (arg === '--') {
      out.push(...argv.slice(i))
      break
    }
    // -flag / -flag=value → --flag / --flag=value, for known long flags only (so "-h" stays).
    if (/^-[^-]/.test(arg)) {
      const name = arg.slice(1).split('=', 1)[0]!
      if (knownFlags.has(name)) arg = `-${arg}`
    }
    if (arg.startsWith('--') && !arg.includes('=')) {
      const name = arg.slice(2)
      if (booleanFlags.has(name)) {
        const next = argv[i + 1]
        if (next !== undefined && parseGoBool(next) !== undefined) {
          out.push(`${arg}=${next}`)
          i++
        } else {
          out.push(`${arg}=true`)
        }
        continue
      }
    }
    out.push(arg)
  }
  return out
}

const UNIT_MS: Record<string, number> = {ns: 1e-6, us: 1e-3, 'µs': 1e-3, 'μs': 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000}

/** Parses a Go duration ("1h30m", "500ms", "0") into milliseconds; undefined if it is not one. */
export function parseGoDuration(text: string): number | undefined {
  const s = text.trim()
  if (s === '0' || s === '-0' || s === '+0') return 0
  const m = /^([+-]?)((?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+$/.exec(s)
  if (!m) return undefined
  const sign = m[1] === '-' ? -1 : 1
  let total = 0
  for (const part of s.replace(/^[+-]/, '').matchAll(/(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/g)) {
    total += Number(part[1]) * UNIT_MS[part[2]!]!
  }
  return sign * total
}

/**
 * Milliseconds as Go's time.Duration prints them: "0s", "250ms", "1.5s", "1m30s", "1h30m0s"
 * (below a second in ms, µs or ns; from a second on, hours and minutes as they apply and
 * seconds always, with trailing zeros of the fraction left out).
 */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0s'
  const sign = ms < 0 ? '-' : ''
  let rest = Math.abs(ms)
  const trim = (n: number, digits: number): string => String(Number(n.toFixed(digits)))
  if (rest < 1e-3) return `${sign}${trim(rest * 1e6, 0)}ns`
  if (rest < 1) return `${sign}${trim(rest * 1e3, 3)}µs`
  if (rest < 1000) return `${sign}${trim(rest, 6)}ms`
  const h = Math.floor(rest / 3_600_000)
  rest -= h * 3_600_000
  const m = Math.floor(rest / 60_000)
  rest -= m * 60_000
  const s = `${trim(rest / 1000, 9)}s`
  return sign + (h ? `${h}h${m}m${s}` : m ? `${m}m${s}` : s)
}
