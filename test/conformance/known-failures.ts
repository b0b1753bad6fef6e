/**
 * Cases kpt passes here and fnr fails, each with its reason (a category of categories.ts): words
 * that come from another program, say. A listed case that fnr passes (or kpt no longer passes)
 * fails the suite, so the list cannot go stale. Any other case kpt passes must pass with fnr.
 *
 * Empty since fnr has `fnr source`/`fnr sink` (fn-eval/error-in-pipe) and go-yaml's words for a
 * mapping nested in a compact one (fn-render/subpkg-has-invalid-kptfile).
 */
export const KNOWN_FAILURES: Record<string, string> = {}
