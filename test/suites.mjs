// The two test sets. `npm test` runs both; `npm run test:unit` runs the unit set alone (under a
// minute), `npm run test:integration` the rest.
//
// Unit: pure logic, in process: no child process (test/support/unit-guard.mjs makes starting one
// fail in `test:unit`), no test bed, no registry; in-process loopback sockets are fine. Every spec
// not listed here is an integration spec, so a new spec file is in the integration set until it is
// listed (test/suites.test.ts checks that every entry exists).

import {readdirSync} from 'node:fs'
import path from 'node:path'
import {fileURLToPath} from 'node:url'

/** Unit spec files, relative to the repository root. */
export const UNIT = [
  'test/cache/response-store.test.ts',
  'test/catalog/sdk-rewrite.test.ts',
  'test/cli/error-json.test.ts',
  'test/cli/fast-serve.test.ts',
  'test/cli/flag-specs.test.ts',
  'test/cli/flag-values.test.ts',
  'test/cli/kpt-errors.test.ts',
  'test/cli/log-format-lines.test.ts',
  'test/commands/config-default-paths.test.ts',
  'test/config/canonical-json.test.ts',
  'test/config/embedded.test.ts',
  'test/config/exec-config.test.ts',
  'test/config/function-config-crd.test.ts',
  'test/config/go-flags.test.ts',
  'test/config/image-names.test.ts',
  'test/config/porch-files-unit.test.ts',
  'test/config/serve-config.test.ts',
  'test/conformance/judge.test.ts',
  'test/container/blob-download.test.ts',
  'test/container/image-cache.test.ts',
  'test/container/layers.test.ts',
  'test/container/resolve-in-root.test.ts',
  'test/container/runtime-choice.test.ts',
  'test/container/runtime-settings.test.ts',
  'test/docs.test.ts',
  'test/evaluators/entrypoint-checks.test.ts',
  'test/evaluators/exec-checks.test.ts',
  'test/evaluators/multi.test.ts',
  'test/evaluators/pod-refused.test.ts',
  'test/fntest/case-kind.test.ts',
  'test/fntest/compare.test.ts',
  'test/fntest/config.test.ts',
  'test/fntest/discover.test.ts',
  'test/fntest/kpt-shim-script.test.ts',
  'test/fntest/patch-names.test.ts',
  'test/fntest/report.test.ts',
  'test/fntest/spelling-names.test.ts',
  'test/functions/config.test.ts',
  'test/grpc/admission.test.ts',
  'test/grpc/budget.test.ts',
  'test/grpc/client-refused.test.ts',
  'test/grpc/dns-server.test.ts',
  'test/grpc/flow-control.test.ts',
  'test/grpc/health-probe.test.ts',
  'test/grpc/health-service.test.ts',
  'test/grpc/hygiene-listener.test.ts',
  'test/grpc/internals.test.ts',
  'test/grpc/proto.test.ts',
  'test/grpc/reply.test.ts',
  'test/grpc/wire.test.ts',
  'test/grpc/serve-refusals.test.ts',
  'test/grpc/status-errors.test.ts',
  'test/grpc/tls.test.ts',
  'test/lib/citations.test.ts',
  'test/lib/drain.test.ts',
  'test/lib/errors.test.ts',
  'test/lib/flags-suggest.test.ts',
  'test/lib/idle-readings.test.ts',
  'test/lib/k8s-dispatcher.test.ts',
  'test/lib/k8s-errors.test.ts',
  'test/lib/k8s-quantity.test.ts',
  'test/lib/k8s-retry.test.ts',
  'test/lib/k8s-watch.test.ts',
  'test/lib/kptfile.test.ts',
  'test/lib/layering.test.ts',
  'test/lib/lazy-loading.test.ts',
  'test/lib/log-settings.test.ts',
  'test/lib/read-file.test.ts',
  'test/lib/reclaim.test.ts',
  'test/lib/save-function.test.ts',
  'test/lib/save-to-kptfile.test.ts',
  'test/lib/source-sink.test.ts',
  'test/lib/split-exec.test.ts',
  'test/lib/turns.test.ts',
  'test/lib/typed-decisions.test.ts',
  'test/metrics/image-labels.test.ts',
  'test/metrics/trace.test.ts',
  'test/operator/dockerfile-context.test.ts',
  'test/operator/manifests-yaml.test.ts',
  'test/pods/admin-gc.test.ts',
  'test/pods/admin-ls.test.ts',
  'test/pods/admin-templates.test.ts',
  'test/pods/busy-node.test.ts',
  'test/pods/claim.test.ts',
  'test/pods/connect.test.ts',
  'test/pods/describe-pod.test.ts',
  'test/pods/gc-rules.test.ts',
  'test/pods/image-metadata.test.ts',
  'test/pods/k8s-client.test.ts',
  'test/pods/labels.test.ts',
  'test/pods/lease-rules.test.ts',
  'test/pods/module-identity.test.ts',
  'test/pods/naming.test.ts',
  'test/pods/observe.test.ts',
  'test/pods/pod-cache-config.test.ts',
  'test/pods/pod-cache.test.ts',
  'test/pods/pod-events.test.ts',
  'test/pods/pod-security.test.ts',
  'test/pods/pod-watch.test.ts',
  'test/pods/porch-leftovers-rules.test.ts',
  'test/pods/quantity.test.ts',
  'test/pods/replicas-rules.test.ts',
  'test/pods/retire.test.ts',
  'test/pods/slot.test.ts',
  'test/pods/template-contract.test.ts',
  'test/pods/template.test.ts',
  'test/pods/warm-list.test.ts',
  'test/pods/warmup.test.ts',
  'test/process/environment.test.ts',
  'test/process/failure.test.ts',
  'test/process/prestart-pool.test.ts',
  'test/process/result-shapes.test.ts',
  'test/process/results-bounds.test.ts',
  'test/process/spawner-requests.test.ts',
  'test/process/sweep-at-close.test.ts',
  'test/process/sweep-reads.test.ts',
  'test/registry/auth-file.test.ts',
  'test/registry/auth.test.ts',
  'test/registry/http.test.ts',
  'test/registry/image-config-platforms.test.ts',
  'test/registry/image-config.test.ts',
  'test/registry/inspect-text.test.ts',
  'test/registry/pull-secret.test.ts',
  'test/registry/reference.test.ts',
  'test/reliability/audit-report.test.ts',
  'test/reliability/limits.test.ts',
  'test/reliability/pod-config.test.ts',
  'test/reliability/pod-security-defaults.test.ts',
  'test/reliability/soak-judge.test.ts',
  'test/reliability/tally.test.ts',
  'test/resourcelist/function-config-args.test.ts',
  'test/resourcelist/function-config-rules.test.ts',
  'test/resourcelist/function-io-unit.test.ts',
  'test/resourcelist/go-key-order.test.ts',
  'test/resourcelist/goyaml.test.ts',
  'test/resourcelist/interruptible-parse.test.ts',
  'test/resourcelist/meta.test.ts',
  'test/resourcelist/package-arguments.test.ts',
  'test/resourcelist/paths.test.ts',
  'test/resourcelist/read-helpers.test.ts',
  'test/resourcelist/read-write.test.ts',
  'test/resourcelist/results-pure.test.ts',
  'test/resourcelist/results-read-format.test.ts',
  'test/resourcelist/reuse.test.ts',
  'test/resourcelist/select.test.ts',
  'test/resourcelist/sink-safety.test.ts',
  'test/resourcelist/source-reading.test.ts',
  'test/resourcelist/sync-order.test.ts',
  'test/resourcelist/transaction.test.ts',
  'test/resourcelist/yaml-scalars.test.ts',
  'test/schema/validate.test.ts',
  'test/scripts/node-runtime.test.ts',
  'test/suites.test.ts',
  'test/telemetry/injection.test.ts',
  'test/wrapper/evaluate-refusals.test.ts',
  'test/wrapper/flags-parse.test.ts',
]

/** Every spec file (unit and integration). */
export const ALL = 'test/**/*.test.ts'

/**
 * Folders whose suites need Go test peers (scripts/build-peers.mjs): they run last, so that on a
 * fresh machine the peers build in the background while every other suite runs.
 */
export const PEER_SUITES = ['catalog', 'conformance', 'porch-side-by-side', 'cluster']

/**
 * Folders run only on request, never by `npm test`: porch-e2e (`npm run porch-e2e`, scripts/porch-e2e.mjs) needs
 * porch-server, whose cold build alone outlasts npm test's CI budget.
 */
export const OPT_IN_SUITES = ['porch-e2e']

/**
 * Spec files outside the peer folders that use the shared control plane (test/support/cluster/shared.ts; its
 * binaries are the last Go peers built): they run just before the cluster folder, whose suites then reuse the control
 * plane the first of them started. Run earlier on a fresh machine, the first would wait for that build (minutes)
 * with every suite behind it. test/suites.test.ts checks that the list names exactly the spec files that do. Not the
 * reliability folder's pod specs (test/reliability/pod-*, on the control plane through support/reliability/pod-serve.ts):
 * the folder runs whole in one process, since its tally judges the whole set (support/reliability/tally.ts), and
 * they start that process's own control plane.
 */
export const CONTROL_PLANE_SPECS = [
  'test/cache/serve-pod-digest.test.ts',
  'test/cli/json.test.ts',
  'test/config/function-config-auto.test.ts',
  'test/config/function-config-crd-serve.test.ts',
  'test/config/porch-files.test.ts',
  'test/fntest/runner.test.ts',
  'test/metrics/otel.test.ts',
  'test/metrics/serve-pod.test.ts',
  'test/node/dns.test.ts',
  'test/node/function-pods.test.ts',
  'test/node/kubelet-process.test.ts',
  'test/node/kubelet.test.ts',
  'test/operator/manifests.test.ts',
  'test/operator/pods-cli.test.ts',
  'test/operator/pods-commands.test.ts',
  'test/operator/pods-gc-busy.test.ts',
  'test/operator/pods-gc-leases.test.ts',
  'test/operator/pods-gc-stale.test.ts',
  'test/operator/pods-warm.test.ts',
  'test/pods/adoption.test.ts',
  'test/pods/faults.test.ts',
  'test/pods/gc.test.ts',
  'test/pods/porch-leftovers.test.ts',
  'test/pods/registry.test.ts',
  'test/pods/replicas.test.ts',
  'test/pods/request-path.test.ts',
  'test/pods/serve.test.ts',
  'test/pods/warm-adoption.test.ts',
  'test/pods/warmup-template.test.ts',
  'test/wrapper/pod.test.ts',
]

/**
 * CONTROL_PLANE_SPECS that `npm test` runs at the end of the other lane, not in the peer lane: the pod suites that
 * left the in-process API server last (2026-11-30). They ran in the other lane on it (330 s in a CI run) and take
 * about as long on the real control plane (314 s in one process at load 2-3), so the lanes stay even. The other lane
 * has a control plane of its own already (the reliability folder's pod specs start it), and at its end, on a
 * fresh machine, the control plane's binaries are long built.
 */
export const OTHER_LANE_SPECS = [
  'test/config/function-config-auto.test.ts',
  'test/config/function-config-crd-serve.test.ts',
  'test/config/porch-files.test.ts',
  'test/metrics/serve-pod.test.ts',
  'test/operator/pods-commands.test.ts',
  'test/operator/pods-gc-leases.test.ts',
  'test/operator/pods-gc-stale.test.ts',
  'test/operator/pods-warm.test.ts',
  'test/pods/adoption.test.ts',
  'test/pods/faults.test.ts',
  'test/pods/gc.test.ts',
  'test/pods/request-path.test.ts',
  'test/pods/warm-adoption.test.ts',
  'test/pods/warmup-template.test.ts',
]

/**
 * Spec files outside the peer folders that need a Go peer (they import scripts/catalog-peers.mjs: a catalog function,
 * Porch's runner): they run first among the peer suites. Run in their folder's turn on a fresh machine, the first
 * would wait there for that peer's build (a cold build of Porch's runner kept the whole run waiting ~7 min). test/suites.test.ts
 * checks that the list names exactly the spec files that do.
 */
export const PEER_SPECS = ['test/container/runc-images.test.ts', 'test/grpc/fairness.test.ts']

/** Spec files under `dir` (relative to the repository root, sorted). */
function specFiles(root, dir) {
  return readdirSync(path.join(root, dir), {withFileTypes: true})
    .flatMap((e) => (e.isDirectory() ? specFiles(root, `${dir}/${e.name}`) : e.name.endsWith('.test.ts') ? [`${dir}/${e.name}`] : []))
    .sort()
}

/**
 * `--spec` arguments for every spec file, the peer suites last (mocha keeps the order given): a folder glob per
 * folder, or its files one by one when some of them are PEER_SPECS (which go first among the peer suites) or
 * CONTROL_PLANE_SPECS (which go before the cluster folder).
 */
function allInOrder() {
  const dir = fileURLToPath(new URL('.', import.meta.url))
  const root = path.dirname(dir)
  const hasSpecs = (d) => readdirSync(d, {withFileTypes: true}).some((e) => (e.isDirectory() ? hasSpecs(path.join(d, e.name)) : e.name.endsWith('.test.ts')))
  const folders = readdirSync(dir, {withFileTypes: true}).filter((e) => e.isDirectory() && hasSpecs(path.join(dir, e.name))).map((e) => e.name).sort()
  const specs = (f) => {
    const files = specFiles(root, `test/${f}`)
    const elsewhere = (file) => CONTROL_PLANE_SPECS.includes(file) || PEER_SPECS.includes(file)
    return files.some(elsewhere) ? files.filter((file) => !elsewhere(file)) : [`test/${f}/**/*.test.ts`]
  }
  const first = folders.filter((f) => !PEER_SUITES.includes(f) && !OPT_IN_SUITES.includes(f)).flatMap(specs)
  const last = [...PEER_SPECS, ...PEER_SUITES.filter((f) => folders.includes(f)).flatMap((f) => (f === 'cluster' ? [...CONTROL_PLANE_SPECS, ...specs(f)] : specs(f)))]
  return ['test/*.test.ts', ...first, ...last].flatMap((g) => ['--spec', g])
}

/**
 * The spec files that need a Go peer or the shared control plane, and those that need neither, as
 * two lists of `--spec` arguments in run order (allInOrder's tail and head).
 */
function peerAndOtherSpecs() {
  const args = allInOrder()
  const specs = args.filter((a) => a !== '--spec')
  const first = specs.findIndex((g) => PEER_SPECS.includes(g))
  const split = first === -1 ? specs.length : first
  return {other: specs.slice(0, split), peer: specs.slice(split)}
}

/**
 * Folders that need no peer but run in the peer lane, before its peer suites, to even the two lanes'
 * times. Measured in one lane (a CI run, 2026-11-30, 11:46), the other lane's files took 1,401 s and
 * the peer lane's 1,365 s, with commands (239 s) and process (107 s) here. Eight pod suites then
 * left the in-process API server for the control plane (~130 s on it, ~250 s on the real one) and
 * moved to the peer lane, while the reliability folder's four (~100 s → ~160 s) stayed in the other
 * lane; process went back to even them. On a cold Go cache commands runs while the peers still
 * build. Rebalance from .cache/test-times-<lane>.json.
 */
export const PEER_LANE_FOLDERS = ['commands']

const RELIABILITY = 'test/reliability/**/*.test.ts'

/**
 * The lanes `npm test` runs at once for a set ('all' or 'integration'), as `{name, args}`: `peer`
 * (PEER_LANE_FOLDERS, then the suites that need a Go peer or the control plane, in allInOrder's
 * order) and `other` (the rest, the reliability folder whole among them: its tally counts the whole
 * set in one process). On
 * 2 cores one mocha process kept the CPU ~40 % idle while its suites waited on servers, pods and
 * the control plane; two keep both cores busy (docs/contributing.md "Lanes").
 */
export function mochaLanes(set) {
  const {other, peer: late} = peerAndOtherSpecs()
  const moved = PEER_LANE_FOLDERS.map((f) => `test/${f}/**/*.test.ts`)
  const own = other.filter((g) => !moved.includes(g))
  const peer = late.filter((g) => !OTHER_LANE_SPECS.includes(g))
  const ignore = set === 'integration' ? UNIT.flatMap((f) => ['--ignore', f]) : []
  const specArgs = (globs) => globs.flatMap((g) => ['--spec', g])
  return [
    // nice 10: the peer lane's suites run the control plane, whose kubelet times exec probes with
    // Kubernetes' 1 s default (Porch's PodTemplate sets none); a CI run with both lanes at the same
    // priority and the machine loaded besides saw a function pod killed for a liveness probe that
    // took longer. The other lane's suites judge stalls by the server's own CPU time, not the wall.
    // The reliability folder first: its floods (1,000 calls at once, 6 MiB uploads, slowloris, memory
    // cgroups) are over before the peer lane reaches the control plane (~800 s in): running beside
    // them, Porch's PodTemplate's exec probes missed their 1 s three times in a row (two CI runs).
    {name: 'other', nice: 10, args: [...specArgs([...own.filter((g) => g === RELIABILITY), ...own.filter((g) => g !== RELIABILITY), ...OTHER_LANE_SPECS]), ...ignore]},
    {name: 'peer', args: [...specArgs([...moved, ...peer]), ...ignore]},
  ]
}

/** Mocha arguments that select a set: 'all', 'unit' or 'integration'. */
export function mochaSelection(set) {
  if (set === 'unit') return [...UNIT.flatMap((f) => ['--spec', f]), '--require', 'test/support/unit-guard.mjs']
  if (set === 'integration') return [...allInOrder(), ...UNIT.flatMap((f) => ['--ignore', f])]
  return allInOrder()
}
