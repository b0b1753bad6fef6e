/**
 * lib/k8s: Kubernetes client construction (lazy), API error mapping, bounded retries and a
 * list-then-watch cache. Importing this module does not load @kubernetes/client-node; connectKube
 * and loadClientNode do.
 */
export * from './client.js'
export * from './errors.js'
export * from './retry.js'
export * from './watch.js'
