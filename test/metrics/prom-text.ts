/**
 * A small parser of the Prometheus text exposition format (0.0.4), for the tests: samples with
 * their labels, # TYPE lines, and sums over label matches.
 */
import http from 'node:http'

export interface Sample {
  name: string
  labels: Record<string, string>
  value: number
}

export class Exposition {
  constructor(
    readonly samples: Sample[],
    readonly types: Map<string, string>,
    readonly text: string,
  ) {}

  /** Sum of the samples named `name` whose labels include `labels` (0 when none). */
  value(name: string, labels: Record<string, string> = {}): number {
    return this.matching(name, labels).reduce((sum, s) => sum + s.value, 0)
  }

  matching(name: string, labels: Record<string, string> = {}): Sample[] {
    return this.samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
  }

  has(name: string): boolean {
    return this.samples.some((s) => s.name === name)
  }

  /** Distinct values of one label over the samples named `name`. */
  labelValues(name: string, label: string): string[] {
    return [...new Set(this.matching(name).map((s) => s.labels[label]).filter((v): v is string => v !== undefined))]
  }
}

function parseValue(text: string): number {
  if (text === '+Inf') return Infinity
  if (text === '-Inf') return -Infinity
  // Go's ParseFloat (Prometheus) takes NaN in any case; prom-client writes "Nan".
  if (/^nan$/i.test(text)) return NaN
  const n = Number(text)
  if (!Number.isFinite(n) && text !== 'Inf') throw new Error(`not a sample value: ${JSON.stringify(text)}`)
  return n
}

/** Parses `{a="x",b="y\"z"}` starting at text[i] === '{'; returns the labels and the index after '}'. */
function parseLabels(text: string, start: number): [Record<string, string>, number] {
  const labels: Record<string, string> = {}
  let i = start + 1
  for (;;) {
    while (text[i] === ' ' || text[i] === ',') i++
    if (text[i] === '}') return [labels, i + 1]
    const eq = text.indexOf('=', i)
    if (eq < 0 || text[eq + 1] !== '"') throw new Error(`bad label at ${i}: ${text}`)
    const name = text.slice(i, eq).trim()
    let value = ''
    i = eq + 2
    for (; i < text.length && text[i] !== '"'; i++) {
      if (text[i] === '\\') {
        const next = text[++i]
        value += next === 'n' ? '\n' : next
      } else value += text[i]
    }
    if (text[i] !== '"') throw new Error(`unterminated label value: ${text}`)
    labels[name] = value
    i++
  }
}

export function parseExposition(text: string): Exposition {
  const samples: Sample[] = []
  const types = new Map<string, string>()
  for (const raw of text.split('\n')) {
    const line = raw.trim()
    if (line === '') continue
    if (line.startsWith('#')) {
      const m = /^#\s+TYPE\s+(\S+)\s+(\S+)/.exec(line)
      if (m) types.set(m[1]!, m[2]!)
      continue
    }
    const nameEnd = line.search(/[{\s]/)
    if (nameEnd <= 0) throw new Error(`bad sample line: ${line}`)
    const name = line.slice(0, nameEnd)
    let labels: Record<string, string> = {}
    let rest = nameEnd
    if (line[nameEnd] === '{') [labels, rest] = parseLabels(line, nameEnd)
    const fields = line.slice(rest).trim().split(/\s+/)
    samples.push({name, labels, value: parseValue(fields[0]!)})
  }
  return new Exposition(samples, types, text)
}

/** GETs a URL over real HTTP: status, content type and body. */
export function httpGet(url: string): Promise<{status: number; contentType: string; body: string}> {
  return new Promise((resolve, reject) => {
    http
      .get(url, {agent: false}, (res) => {
        let body = ''
        res.setEncoding('utf8')
        res.on('data', (c: string) => (body += c))
        res.on('end', () => resolve({status: res.statusCode ?? 0, contentType: String(res.headers['content-type'] ?? ''), body}))
      })
      .on('error', reject)
  })
}

/** Scrapes http://127.0.0.1:port/metrics and parses it. */
export async function scrape(port: number): Promise<Exposition> {
  const res = await httpGet(`http://127.0.0.1:${port}/metrics`)
  if (res.status !== 200) throw new Error(`GET /metrics: ${res.status} ${res.body}`)
  return parseExposition(res.body)
}
