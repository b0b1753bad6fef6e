/**
 * Connections to the API server, shared and short-lived when idle.
 *
 * client-node 2 sends its requests through undici's fetch. For a cluster with TLS settings it
 * builds a new undici Agent for every request (KubeConfig.createDispatcher, not cached), so every
 * request paid a TLS handshake, and its socket then stayed open, idle, for as long as the server's
 * keep-alive hint allowed (up to undici's 600 s cap). Without TLS settings, fetch's global agent
 * kept as many idle sockets as requests had run at once. A burst of pod-runtime requests left
 * dozens of sockets open (test/reliability/pod-load: 37 -> 72 descriptors, still there 30 s on).
 *
 * shareConnections gives a KubeConfig one Agent per distinct TLS identity (server, CA, client
 * certificate and key, verification, server name), reused by every request, whose idle sockets
 * close after IDLE_SOCKET_MS whatever the server hints. Proxied clusters keep client-node's own.
 */
import {createHash} from 'node:crypto'

import type {KubeConfig} from '@kubernetes/client-node'

/** How long an idle connection to the API server stays open (undici's own default). */
export const IDLE_SOCKET_MS = 4_000

/** The Agent class (undici's, from the client-node bundle). */
export type AgentClass = new (options: {connect?: Record<string, unknown>; keepAliveTimeout?: number; keepAliveMaxTimeout?: number}) => unknown

type DispatcherOptions = {type: 'agent' | 'none' | 'proxy' | 'socks'; connect?: Record<string, unknown>}
interface WithDispatcher {
  createDispatcher(cluster: {server?: string; proxyUrl?: string} | null, agentOptions: object): unknown
  createDispatcherOptions(cluster: {server?: string} | null, agentOptions: object): DispatcherOptions
}

const SHARED = Symbol.for('fnr.sharedDispatchers')

/** A short key for one TLS identity: the server and a digest of the connection's TLS settings. */
function identityKey(server: string, connect: Record<string, unknown>): string {
  const hash = createHash('sha256')
  for (const name of ['ca', 'cert', 'key', 'pfx', 'passphrase', 'rejectUnauthorized', 'servername']) {
    const v = connect[name]
    hash.update(`${name}=`)
    if (Buffer.isBuffer(v) || typeof v === 'string') hash.update(v)
    else if (Array.isArray(v)) for (const part of v as unknown[]) hash.update(Buffer.isBuffer(part) || typeof part === 'string' ? part : String(part))
    else hash.update(String(v))
    hash.update('\0')
  }
  return `${server}\0${hash.digest('base64')}`
}

/** Makes `kubeConfig`'s requests share connections (see the module comment); idempotent. */
export function shareConnections(kubeConfig: KubeConfig, Agent: AgentClass): void {
  const kc = kubeConfig as unknown as WithDispatcher & Record<symbol, unknown>
  if (kc[SHARED] || typeof kc.createDispatcher !== 'function' || typeof kc.createDispatcherOptions !== 'function') return
  const agents = new Map<string, unknown>()
  const own = kc.createDispatcher.bind(kc)
  kc[SHARED] = agents
  kc.createDispatcher = (cluster, agentOptions) => {
    const opts = kc.createDispatcherOptions(cluster, agentOptions)
    if (opts.type !== 'agent' && opts.type !== 'none') return own(cluster, agentOptions)
    const connect = opts.connect ?? {}
    const key = identityKey(cluster?.server ?? '', connect)
    let agent = agents.get(key)
    if (agent === undefined) {
      agent = new Agent({...(opts.type === 'agent' ? {connect} : {}), keepAliveTimeout: IDLE_SOCKET_MS, keepAliveMaxTimeout: IDLE_SOCKET_MS})
      agents.set(key, agent)
    }
    return agent
  }
}
