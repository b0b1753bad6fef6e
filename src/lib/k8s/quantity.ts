/**
 * Kubernetes resource quantities ("100m", "128Mi", "1.5", "2e3", "1E"), parsed as the API server
 * parses them, and the checks the API server makes on a container's requests and limits, so a pod
 * it would reject is refused with a clear error before fnr asks for it (the in-process test server
 * stores whatever it is given).
 *
 * The grammar (the Quantity type of k8s.io/apimachinery, documented in the Kubernetes API reference):
 *
 *   <quantity>        ::= <signedNumber><suffix>
 *   <signedNumber>    ::= <number> | <sign><number>      (sign: + or -)
 *   <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
 *   <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
 *   <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
 *   <decimalSI>       ::= n | u | m | "" | k | M | G | T | P | E
 *   <decimalExponent> ::= "e" <signedNumber> | "E" <signedNumber>   (an integer exponent)
 *
 * "1E" is 10^18 (exa), "1E3" is 1000. No whitespace anywhere. A value is kept exactly (a rational
 * number as two BigInts), so "1Gi" and "1073741824" compare equal and "0.5" equals "500m".
 */

import {FnrError} from '../errors.js'

export class QuantityError extends Error {}

/** A parsed quantity: the exact value num/den (den > 0), and the text it came from. */
export interface Quantity {
  text: string
  num: bigint
  den: bigint
}

const BINARY: Record<string, number> = {Ki: 10, Mi: 20, Gi: 30, Ti: 40, Pi: 50, Ei: 60}
const DECIMAL: Record<string, number> = {n: -9, u: -6, m: -3, '': 0, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18}
/** Exponents beyond this are refused: the API server caps quantities at 2^63-1 (about 9.2e18) anyway. */
const MAX_EXPONENT = 1000

const NUMBER = /^([+-]?)(\d+\.?\d*|\.\d+)(.*)$/s

/** Parses a quantity; QuantityError saying what is wrong with it. */
export function parseQuantity(input: string | number): Quantity {
  const text = typeof input === 'number' ? String(input) : input
  if (typeof text !== 'string' || text === '') throw new QuantityError('a quantity must not be empty')
  if (typeof input === 'number' && !Number.isFinite(input)) throw new QuantityError(`${text} is not a quantity`)
  const m = NUMBER.exec(text)
  if (!m) throw new QuantityError(`${JSON.stringify(text)} is not a quantity: it must start with a number (like 100m, 128Mi, 1.5 or 2e3)`)
  const [, sign, digits, suffix] = m as unknown as [string, string, string, string]
  const [whole = '', frac = ''] = digits.split('.')
  let num = BigInt((whole || '0') + frac)
  let den = 10n ** BigInt(frac.length)
  if (sign === '-') num = -num
  if (suffix in BINARY) {
    num *= 2n ** BigInt(BINARY[suffix]!)
  } else if (suffix in DECIMAL) {
    const e = DECIMAL[suffix]!
    if (e >= 0) num *= 10n ** BigInt(e)
    else den *= 10n ** BigInt(-e)
  } else if (/^[eE][+-]?\d+$/.test(suffix)) {
    const e = Number(suffix.slice(1))
    if (!Number.isSafeInteger(e) || Math.abs(e) > MAX_EXPONENT) throw new QuantityError(`${JSON.stringify(text)} is not a quantity: the exponent is out of range`)
    if (e >= 0) num *= 10n ** BigInt(e)
    else den *= 10n ** BigInt(-e)
  } else {
    throw new QuantityError(
      `${JSON.stringify(text)} is not a quantity: unknown suffix ${JSON.stringify(suffix)} (use Ki, Mi, Gi, Ti, Pi, Ei, n, u, m, k, M, G, T, P, E or an exponent like e3)`,
    )
  }
  return {text, num, den}
}

/** -1, 0 or 1 as a < b, a = b, a > b (exact). */
export function compareQuantities(a: Quantity, b: Quantity): number {
  const l = a.num * b.den
  const r = b.num * a.den
  return l < r ? -1 : l > r ? 1 : 0
}

/** True when the text is a valid quantity. */
export function isQuantity(input: string | number): boolean {
  try {
    parseQuantity(input)
    return true
  } catch {
    return false
  }
}

const STANDARD_RESOURCES = new Set(['cpu', 'memory', 'ephemeral-storage'])
const QUALIFIED_NAME = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/

/** Why a container resource name is not one the API server accepts, or undefined. */
export function resourceNameProblem(name: string): string | undefined {
  if (STANDARD_RESOURCES.has(name)) return undefined
  if (name.startsWith('hugepages-')) return isQuantity(name.slice('hugepages-'.length)) ? undefined : `${JSON.stringify(name)} is not a valid hugepages resource (hugepages-<size>, like hugepages-2Mi)`
  if (!QUALIFIED_NAME.test(name) || name.length > 316) return `${JSON.stringify(name)} is not a valid resource name`
  if (!name.includes('/')) return `${JSON.stringify(name)} is not a standard resource (cpu, memory, ephemeral-storage, hugepages-<size>) nor a fully qualified one (like example.com/gpu)`
  return undefined
}

export interface ResourceRequirementsLike {
  requests?: Record<string, unknown>
  limits?: Record<string, unknown>
}

/**
 * The problems the API server would find in one container's requests and limits: bad names,
 * malformed or negative quantities, a request above its limit, an extended or hugepages resource whose
 * request differs from its limit; with `complete` (a container's whole resources, not an override merged into a
 * template later), also such a resource without a limit, and hugepages without cpu or memory. Each is one line starting with `where` (e.g.
 * "spec.containers[0] (function).resources"). Empty when the API server would accept them.
 */
export function resourceRequirementsProblems(resources: ResourceRequirementsLike | undefined, where: string, {complete = false}: {complete?: boolean} = {}): string[] {
  const problems: string[] = []
  if (!resources) return problems
  const parsed: Record<'requests' | 'limits', Map<string, Quantity>> = {requests: new Map(), limits: new Map()}
  for (const kind of ['requests', 'limits'] as const) {
    const map = resources[kind]
    if (map === undefined || map === null) continue
    if (typeof map !== 'object' || Array.isArray(map)) {
      problems.push(`${where}.${kind} must be a map of resource names to quantities`)
      continue
    }
    for (const [name, value] of Object.entries(map)) {
      const nameProblem = resourceNameProblem(name)
      if (nameProblem) problems.push(`${where}.${kind}: ${nameProblem}`)
      if (typeof value !== 'string' && typeof value !== 'number') {
        problems.push(`${where}.${kind}.${name}: ${JSON.stringify(value)} is not a quantity (like 100m or 128Mi)`)
        continue
      }
      let q: Quantity
      try {
        q = parseQuantity(value)
      } catch (err) {
        problems.push(`${where}.${kind}.${name}: ${(err as Error).message}`)
        continue
      }
      if (q.num < 0n) problems.push(`${where}.${kind}.${name}: ${JSON.stringify(String(value))} must be greater than or equal to 0`)
      parsed[kind].set(name, q)
    }
  }
  problems.push(...limitProblems(parsed, where, complete))
  return problems
}

/** Requests against limits, as the API server checks them (see resourceRequirementsProblems). */
function limitProblems(parsed: Record<'requests' | 'limits', Map<string, Quantity>>, where: string, complete: boolean): string[] {
  const problems: string[] = []
  for (const [name, request] of parsed.requests) {
    const limit = parsed.limits.get(name)
    // as the API server: a resource is native when its name has no '/' or contains kubernetes.io/, and only native
    // resources other than hugepages may be overcommitted (the others need a limit equal to the request)
    const native = !name.includes('/') || name.includes('kubernetes.io/')
    const overcommit = native && !name.startsWith('hugepages-')
    if (!limit) {
      if (!overcommit && complete) problems.push(`${where}.limits.${name}: a limit is required (${native ? 'hugepages' : 'an extended resource'} cannot be overcommitted)`)
      continue
    }
    if (!overcommit && compareQuantities(request, limit) !== 0) {
      problems.push(`${where}.requests.${name}: ${JSON.stringify(request.text)} must equal the limit ${JSON.stringify(limit.text)} (${native ? 'hugepages' : 'an extended resource'} cannot be overcommitted)`)
    } else if (compareQuantities(request, limit) > 0) {
      problems.push(`${where}.requests.${name}: ${JSON.stringify(request.text)} is more than the limit ${JSON.stringify(limit.text)} (a request must be less than or equal to its limit)`)
    }
  }
  const names = [...parsed.requests.keys(), ...parsed.limits.keys()]
  if (complete && names.some((n) => n.startsWith('hugepages-')) && !names.some((n) => n === 'cpu' || n === 'memory')) {
    problems.push(`${where}: hugepages need a cpu or memory request or limit as well`)
  }
  return problems
}

interface ContainerLike {
  name?: string
  resources?: ResourceRequirementsLike
}

/** The problems of every container and init container of a pod spec (see resourceRequirementsProblems). */
export function podResourceProblems(spec: {containers?: ContainerLike[]; initContainers?: ContainerLike[]} | undefined): string[] {
  const problems: string[] = []
  for (const kind of ['initContainers', 'containers'] as const) {
    ;(spec?.[kind] ?? []).forEach((c, i) => {
      if (c && typeof c === 'object') problems.push(...resourceRequirementsProblems(c.resources, `spec.${kind}[${i}] (${c.name ?? '?'}).resources`, {complete: true}))
    })
  }
  return problems
}

/**
 * The function container's requests and limits (--pod-requests/--pod-limits, or the library's `pod.resources`)
 * checked as the API server checks them: FnrError('Usage') at start, before any pod is made.
 */
export function checkPodResources(resources: ResourceRequirementsLike | undefined): void {
  const problems = resourceRequirementsProblems(resources, 'resources').map((p) => p.replace(/^resources\.(requests|limits)/, (_, k: string) => `--pod-${k}`))
  if (problems.length > 0) throw new FnrError('Usage', `${problems.join('; ')} (the API server would reject every pod)`)
}
