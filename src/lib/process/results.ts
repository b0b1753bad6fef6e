/**
 * Reading structured results out of a function's output without keeping the parsed document:
 * used on failure paths (exec evaluator, wrapper server) to report what went wrong. The YAML
 * parser is imported lazily so the success path never pays for it.
 */

export interface ResultResourceRef {
  apiVersion?: string
  kind?: string
  name?: string
  namespace?: string
}

/** One structured result, as the KRM functions spec defines it (legacy shapes normalised). */
export interface FunctionResult {
  message: string
  /** As the function wrote it (`error`, `warning`, `info`, or anything else); absent means info. */
  severity?: string
  resourceRef?: ResultResourceRef
  field?: {path?: string; currentValue?: unknown; proposedValue?: unknown}
  file?: {path?: string; index?: number}
  tags?: Record<string, string>
}

function asRecord(v: unknown): Record<string, unknown> | undefined {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined
}

/** Normalises one result, accepting the legacy shapes kpt accepts (resourceRef.metadata, field.suggestedValue). */
export function normaliseResult(raw: unknown): FunctionResult | undefined {
  const r = asRecord(raw)
  if (!r) return undefined
  const out: FunctionResult = {message: typeof r.message === 'string' ? r.message : String(r.message ?? '')}
  if (typeof r.severity === 'string' && r.severity !== '') out.severity = r.severity
  const ref = asRecord(r.resourceRef)
  if (ref) {
    const meta = asRecord(ref.metadata)
    out.resourceRef = {
      apiVersion: typeof ref.apiVersion === 'string' ? ref.apiVersion : undefined,
      kind: typeof ref.kind === 'string' ? ref.kind : undefined,
      name: typeof ref.name === 'string' ? ref.name : typeof meta?.name === 'string' ? meta.name : undefined,
      namespace: typeof ref.namespace === 'string' ? ref.namespace : typeof meta?.namespace === 'string' ? meta.namespace : undefined,
    }
  }
  const field = asRecord(r.field)
  if (field) {
    out.field = {
      path: typeof field.path === 'string' ? field.path : undefined,
      currentValue: field.currentValue,
      proposedValue: field.proposedValue ?? field.suggestedValue,
    }
  }
  const file = asRecord(r.file)
  if (file) out.file = {path: typeof file.path === 'string' ? file.path : undefined, index: typeof file.index === 'number' ? file.index : undefined}
  const tags = asRecord(r.tags)
  if (tags) out.tags = Object.fromEntries(Object.entries(tags).map(([k, v]) => [k, String(v)]))
  return out
}

/** The results of a parsed ResourceList object (list form or the legacy {items: [...]} form). */
export function resultsOf(resourceList: unknown): FunctionResult[] {
  const rl = asRecord(resourceList)
  if (!rl) return []
  let raw = rl.results
  const wrapped = asRecord(raw)
  if (wrapped && Array.isArray(wrapped.items)) raw = wrapped.items
  if (!Array.isArray(raw)) return []
  return raw.map((r) => normaliseResult(r)).filter((r): r is FunctionResult => r !== undefined)
}

/**
 * The top-level `results:` entry of a block-style YAML document (from the `results:` line at
 * column 0 to the next line that starts another top-level key or document), or undefined.
 */
export function resultsSection(text: string): string | undefined {
  const start = /^results[ \t]*:/m.exec(text)
  if (!start) return undefined
  let end = text.length
  for (let at = text.indexOf('\n', start.index); at >= 0 && at + 1 < text.length; at = text.indexOf('\n', at + 1)) {
    const c = text[at + 1]!
    const continues = c === ' ' || c === '\t' || c === '\n' || c === '\r' || c === '#' || (c === '-' && !text.startsWith('---', at + 1))
    if (!continues) {
      end = at + 1
      break
    }
  }
  return text.slice(start.index, end)
}

/**
 * Parses output bytes and returns their results; output that does not parse has none. Only the
 * results are parsed when they can be found on their own: parsing a whole 6 MiB output took
 * about 9 s of blocked event loop (every other call of the server waited).
 */
export async function readResults(output: Uint8Array): Promise<FunctionResult[]> {
  if (output.length === 0) return []
  const text = Buffer.from(output.buffer, output.byteOffset, output.byteLength).toString('utf8')
  // Cheap pre-check: no results key, no results (skips the YAML parser on large outputs).
  if (!/(^|\n|[{,]\s*)"?results"?\s*:/.test(text)) return []
  if (/^\s*\{/.test(text)) {
    try {
      return resultsOf(JSON.parse(text))
    } catch {
      // not JSON after all: YAML below
    }
  }
  const {parse} = await import('yaml')
  // uniqueKeys off: the yaml package's duplicate-key check compares every pair of keys of a map,
  // which blocks the event loop for seconds on a map of 20,000 keys.
  const options = {maxAliasCount: 100, uniqueKeys: false}
  const section = resultsSection(text)
  if (section !== undefined) {
    try {
      return resultsOf(parse(section, options))
    } catch {
      // e.g. an alias to an anchor outside the section: parse the whole document
    }
  }
  try {
    return resultsOf(parse(text, options))
  } catch {
    return []
  }
}

export function errorResults(results: readonly FunctionResult[]): FunctionResult[] {
  return results.filter((r) => r.severity === 'error')
}

/**
 * One result as kpt prints it: `[severity] apiVersion/kind/namespace/name field.path: message`.
 * Empty parts are left out; the field part is there whenever the result has a `field`; no
 * severity prints as `[info]`.
 */
export function formatResult(r: FunctionResult): string {
  const ref = r.resourceRef
  const ids = ref ? [ref.apiVersion, ref.kind, ref.namespace, ref.name].filter((s): s is string => !!s) : []
  let line = `[${r.severity || 'info'}]`
  if (ids.length > 0) line += ` ${ids.join('/')}`
  if (r.field) line += ` ${r.field.path ?? ''}`
  return `${line}: ${r.message}`
}
