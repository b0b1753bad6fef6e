/**
 * Reading the module traces test/support/pods/module-trace.mjs writes (one resolved URL a line).
 * @kubernetes/client-node reaches a process either as the package or, after `npm run build`, as
 * fnr's tree-shaken bundle of it (dist/lib/k8s/client-node.bundle.mjs): both count as loading it.
 */
export const CLIENT_NODE_BUNDLE_SUFFIX = '/dist/lib/k8s/client-node.bundle.mjs'

export function isClientNodeModule(url: string): boolean {
  return url.includes('/node_modules/@kubernetes/client-node/') || url.endsWith(CLIENT_NODE_BUNDLE_SUFFIX)
}
