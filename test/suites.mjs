// The two test sets. `npm test` runs both; `npm run test:unit` runs the unit set alone (under a
// minute), `npm run test:integration` the rest.
//
// Unit: pure logic, in process: no child process (test/support/unit-guard.mjs makes starting one
// fail in `test:unit`), no test bed, no registry; in-process loopback sockets are fine. Every spec
// not listed here is an integration spec, so a new spec file is in the integration set until it is
// listed (test/suites.test.ts checks that every entry exists).

/** Unit spec files, relative to the repository root. */
export const UNIT = [
  'test/cache/response-store.test.ts',
  'test/config/exec-config.test.ts',
  'test/config/function-config-crd.test.ts',
  'test/config/go-flags.test.ts',
  'test/docs.test.ts',
  'test/evaluators/multi.test.ts',
  'test/fntest/compare.test.ts',
  'test/grpc/flow-control.test.ts',
  'test/k8s/patch-and-selectors.test.ts',
  'test/lib/errors.test.ts',
  'test/lib/lazy-loading.test.ts',
  'test/metrics/trace.test.ts',
  'test/pods/gc-rules.test.ts',
  'test/pods/k8s-client.test.ts',
  'test/pods/module-identity.test.ts',
  'test/pods/naming.test.ts',
  'test/pods/pod-cache-config.test.ts',
  'test/pods/pod-cache.test.ts',
  'test/pods/replicas-rules.test.ts',
  'test/pods/template.test.ts',
  'test/registry/auth.test.ts',
  'test/registry/pull-secret.test.ts',
  'test/registry/reference.test.ts',
  'test/reliability/pod-config.test.ts',
  'test/reliability/soak-judge.test.ts',
  'test/reliability/tally.test.ts',
  'test/resourcelist/read-write.test.ts',
  'test/suites.test.ts',
]

/** Every spec file (unit and integration). */
export const ALL = 'test/**/*.test.ts'

/** Mocha arguments that select a set: 'all', 'unit' or 'integration'. */
export function mochaSelection(set) {
  if (set === 'unit') return [...UNIT.flatMap((f) => ['--spec', f]), '--require', 'test/support/unit-guard.mjs']
  if (set === 'integration') return ['--spec', ALL, ...UNIT.flatMap((f) => ['--ignore', f])]
  return ['--spec', ALL]
}
