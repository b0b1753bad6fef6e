/**
 * The part of @kubernetes/client-node that fnr uses, and nothing else.
 *
 * `npm run build` bundles this module with its imports into dist/lib/k8s/client-node.bundle.mjs
 * (scripts/build.mjs): the package's index loads every API group and model of Kubernetes (its
 * ObservableAPI module alone is 6 MB of source that V8 keeps), which costs about 70 MB of RSS and
 * 0.8 s; tree-shaken to these names it costs about 20 MB and 0.45 s. client.ts loads the bundle,
 * or this module (the whole package) when there is no build.
 */
export {CoordinationV1Api, CoreV1Api, CustomObjectsApi, KubeConfig, PatchStrategy, Watch, setHeaderOptions} from '@kubernetes/client-node'
// undici's Agent, which client-node 2 sends its requests through (dispatcher.ts shares one per identity)
export {Agent as UndiciAgent} from 'undici'
