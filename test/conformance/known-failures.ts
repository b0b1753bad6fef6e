/**
 * Cases kpt passes here and fnr fails, each with its reason: what another change is fixing in
 * `fnr eval` / `fnr render` (src/commands, src/cli), or what fnr does not have. The lead shrinks
 * this list once that change is merged; a listed case that fnr passes (or kpt no longer passes)
 * fails the suite, so the list cannot go stale. Any other case kpt passes must pass with fnr.
 */
import {FIRST_LINE, FLAGS, FORM, SOURCE_SINK} from './categories.js'

export const KNOWN_FAILURES: Record<string, string> = {
  // Exit code 2 (or 4) where kpt exits 1, `fnr: MSG (see --help)` where kpt prints `Error: MSG`
  // (or `error: MSG`): fnr passes each once its exit code and message form are kpt's.
  'fn-eval/fnconfig-missing-name/pkg': FORM,
  'fn-eval/missing-fn-image': FORM,
  'fn-eval/multiple-fn-config-one-file/pkg': FORM,
  'fn-eval/non-krm-resource': FORM,
  'fn-render/exec-without-permissions': FORM,
  'fn-render/missing-fn-image': FORM,
  'fn-render/non-krm-resource-no-pipeline': FORM,
  'fn-render/out-of-place-dir-exists-error': FORM,
  'fn-render/path-index-ancestor': FORM,
  'fn-render/path-index-outofpackage': FORM,
  // kpt's command line: DIR defaults to `.`, --image-pull-policy, --include-meta-resources.
  'fn-eval/exec-function-with-args': FLAGS,
  'fn-eval/image-pull-policy-never': FLAGS,
  'fn-eval/include-meta-resources-v1alpha1': FLAGS,
  'fn-eval/out-of-place-dir-exists-error': FLAGS,
  'fn-render/image-pull-policy-never': FLAGS,
  // Exit code 2 and form, and the message: kpt's `…ScalarNode: node contents:\nI am not a valid
  // config file` is printed up to `node contents:` (errorLine in src/lib/errors.ts prints one line).
  'fn-eval/invalid-fn-config-file/pkg': FIRST_LINE,
  // exec.sh pipes `kpt fn source | kpt fn eval - … | kpt fn sink out`: fnr has neither command.
  'fn-eval/error-in-pipe': SOURCE_SINK,
}
