/**
 * Cases kpt passes here and fnr fails, each with its reason: words that come from another program
 * (a YAML parser), or a command fnr does not have. A listed case that fnr
 * passes (or kpt no longer passes) fails the suite, so the list cannot go stale. Any other case kpt
 * passes must pass with fnr.
 */
import {SOURCE_SINK, YAML_MESSAGE} from './categories.js'

export const KNOWN_FAILURES: Record<string, string> = {
  // The YAML parser's own words for a syntax error: kpt (Go's yaml.v3) says "mapping values are
  // not allowed in this context" at line 10, fnr's parser "Nested mappings are not allowed in
  // compact mappings" at line 9; the rest of the message and the outcome are kpt's.
  'fn-render/subpkg-has-invalid-kptfile': YAML_MESSAGE,
  // exec.sh pipes `kpt fn source | kpt fn eval - … | kpt fn sink out`: fnr has neither command.
  'fn-eval/error-in-pipe': SOURCE_SINK,
}
