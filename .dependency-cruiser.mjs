// The dependency rules of src/ (docs/architecture.md, "Layers"): no circles, no import into a
// higher layer, src/lib free of oclif and of the CLI, and the pure pod model. Checked by
// `npm run lint` (depcruise) and by test/lib/layering.test.ts, which also shows that each rule
// catches a planted bad import.

/**
 * The layers of src/, lowest first. A module may import its own layer and the layers below it,
 * never one above. Type-only imports count: a type names its module as much as a value does.
 */
export const LAYERS = [
  // leaf helpers: import nothing of src/lib but each other
  ['foundation', '^src/lib/(errors|function-result|headroom|read-file|stdin|turns|fair-queue|idle-calls)[.]ts$'],
  // running one function process
  ['process', '^src/lib/process/'],
  // logs, metrics and traces; ResourceLists and Kptfiles; the call budget
  ['telemetry-documents-budget', '^src/lib/(telemetry|resourcelist)/|^src/lib/(kptfile|reclaim|budget)[.]ts$'],
  // the outside world's clients: Kubernetes, OCI registries
  ['clients', '^src/lib/(k8s|registry)/'],
  // fnr's configuration (files, flags' meanings, FunctionConfigs read through k8s/) and the schemas that validate it
  ['config', '^src/lib/(config|schema)/'],
  // the contract every evaluator keeps, which the gRPC server serves
  ['evaluator-contract', '^src/lib/evaluator[.]ts$'],
  ['grpc', '^src/lib/grpc/'],
  // the pod runtime, from its pure model up
  ['pods-model', '^src/lib/pods/model/'],
  ['pods-cluster', '^src/lib/pods/cluster/'],
  ['pods-runtime', '^src/lib/pods/runtime/'],
  ['pods-admin', '^src/lib/pods/admin/'],
  // evaluators, the response cache, and the container runtimes of fnr eval and render
  ['evaluators-cache', '^src/lib/(evaluators|cache|container)/'],
  // what the commands call: serve, wrapper-server, eval (and its --save), render, source and sink, test, and their flag specs
  ['entry-points', '^src/lib/(flags|fntest)/|^src/lib/(eval|render|source-sink|drain|first-call|serve|wrapper|save-function)[.]ts$'],
  // the CLI adapter, the packaged binaries, oclif hooks
  ['adapters', '^src/(cli|bin|hooks)/'],
  ['commands', '^src/commands/'],
]

const anyOf = (patterns) => patterns.map((p) => `(?:${p})`).join('|')
const ALL_LAYERS = anyOf(LAYERS.map(([, p]) => p))

const upward = LAYERS.slice(0, -1).map(([name, path], i) => ({
  name: `no-upward-from-${name}`,
  comment: `${name} may import only its own layer and the ones below it (.dependency-cruiser.mjs LAYERS)`,
  severity: 'error',
  from: {path},
  to: {path: anyOf(LAYERS.slice(i + 1).map(([, p]) => p))},
}))

/** What src/lib/pods/model/ may import at run time besides itself (type-only imports are free). */
const MODEL_RUNTIME_IMPORTS = [
  '^src/lib/pods/model/',
  '^src/lib/errors[.]ts$',
  '^src/lib/config/canonical-json[.]ts$',
  '^src/lib/registry/image-config[.]ts$',
  '^(node:)?(crypto|os)$',
  '(^|/)node_modules/yaml/',
]

/** @type {import('dependency-cruiser').IConfiguration} */
export default {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'no module imports itself through others (type-only imports included)',
      severity: 'error',
      from: {path: '^src/'},
      to: {circular: true},
    },
    {
      name: 'in-a-layer',
      comment: 'every module of src/ belongs to a layer of .dependency-cruiser.mjs (add a new folder or top-level file to LAYERS)',
      severity: 'error',
      from: {path: '^src/', pathNot: ALL_LAYERS},
      to: {},
    },
    {
      name: 'lib-without-oclif',
      comment: 'src/lib and src/bin import no oclif and nothing of the CLI adapter or the commands',
      severity: 'error',
      from: {path: '^src/(lib|bin)/'},
      to: {path: '(^|/)node_modules/@oclif/|^@oclif/|^src/(cli|commands|hooks)/'},
    },
    {
      name: 'pure-pod-model',
      comment: 'src/lib/pods/model/ imports at run time only itself and pure helpers: no Kubernetes client, cluster/, runtime/, admin/ or telemetry',
      severity: 'error',
      from: {path: '^src/lib/pods/model/'},
      to: {pathNot: anyOf(MODEL_RUNTIME_IMPORTS), dependencyTypesNot: ['type-only']},
    },
    ...upward,
  ],
  options: {
    // type-only imports are edges too (an `import type` of a module above is an upward arrow)
    tsPreCompilationDeps: true,
    tsConfig: {fileName: 'tsconfig.json'},
    doNotFollow: {path: 'node_modules'},
    exclude: {path: '[.]d[.]ts$'},
  },
}
