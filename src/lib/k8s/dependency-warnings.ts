/**
 * Deprecation warnings that @kubernetes/client-node 1.x's own dependencies raise on current Node
 * (node-fetch and whatwg-url: DEP0040 `punycode`, DEP0169 `url.parse()`). They say nothing to an
 * operator running `fnr pods …` or `fnr serve`, and they broke the CLI's one-line error form
 * (test/operator/pods-cli.test.ts). Only those two codes are dropped, and only once client-node is
 * loaded; every other warning still prints. Moving to client-node 2.x (undici instead of
 * node-fetch) removes their cause; this module goes with it.
 */
const DEPENDENCY_DEPRECATIONS = new Set(['DEP0040', 'DEP0169'])

let installed = false

/** The warning code process.emitWarning was given, in either of its call forms. */
function warningCode(args: unknown[]): unknown {
  const [typeOrOptions, code] = args
  if (typeOrOptions !== null && typeof typeOrOptions === 'object') return (typeOrOptions as {code?: unknown}).code
  return code
}

/** Drops client-node's dependencies' deprecation warnings (see the module comment); idempotent. */
export function quietDependencyDeprecations(): void {
  if (installed) return
  installed = true
  const emit = process.emitWarning.bind(process) as (...args: unknown[]) => void
  process.emitWarning = ((...args: unknown[]): void => {
    if (DEPENDENCY_DEPRECATIONS.has(warningCode(args.slice(1)) as string)) return
    emit(...args)
  }) as typeof process.emitWarning
}
