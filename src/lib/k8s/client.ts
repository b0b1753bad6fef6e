/**
 * Kubernetes client construction for the pod runtime and the pods commands.
 *
 * @kubernetes/client-node costs about 0.45 s to import, so it is only ever loaded here, with a
 * dynamic import, when something asks for a cluster. Nothing on the exec or eval path imports this
 * module's loader (type-only imports of client-node are fine: they vanish at compile time).
 *
 * Where the configuration comes from, in order:
 *   1. an explicit kubeconfig file (--kubeconfig);
 *   2. in-cluster config (KUBERNETES_SERVICE_HOST and the service account token), preferred by
 *      `fnr serve` since that is where it normally runs;
 *   3. $KUBECONFIG (every file in the list, merged) or ~/.kube/config.
 * Nothing found is a Config error with what to do, never a silent fallback to localhost:8080
 * (which is what client-node's loadFromDefault does).
 */
import {existsSync, readFileSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'

import type {CoreV1Api, KubeConfig} from '@kubernetes/client-node'

import {readConfigFile} from '../read-file.js'
import {FnrError} from '../errors.js'
import {shareConnections} from './dispatcher.js'

/** The client-node classes and functions fnr uses (client-node-api.ts). */
export type ClientNode = typeof import('./client-node-api.js')

/**
 * Where `npm run build` puts client-node-api.ts bundled and tree-shaken (scripts/build.mjs); the
 * same URL from src/lib/k8s (tests, bin/dev.js) and from dist/lib/k8s.
 */
export const CLIENT_NODE_BUNDLE = new URL('../../../dist/lib/k8s/client-node.bundle.mjs', import.meta.url)

let loading: Promise<ClientNode> | undefined
let loaded = false

/**
 * Imports @kubernetes/client-node once (lazily): the bundle when there is one (about 50 MB less
 * RSS and 0.35 s less than the package's index), else the package. FNR_CLIENT_NODE=package forces
 * the package (e.g. to debug with its own sources).
 */
export function loadClientNode(): Promise<ClientNode> {
  loading ??= importClientNode().then((m) => {
    loaded = true
    return m
  })
  return loading
}

async function importClientNode(): Promise<ClientNode> {
  if (process.env.FNR_CLIENT_NODE !== 'package' && existsSync(CLIENT_NODE_BUNDLE)) return (await import(CLIENT_NODE_BUNDLE.href)) as ClientNode
  return import('./client-node-api.js')
}

/** True once this process has imported @kubernetes/client-node through loadClientNode. */
export function clientNodeLoaded(): boolean {
  return loaded
}

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount'

export interface KubeConnectOptions {
  /** A kubeconfig file; '' or undefined means "find one". */
  kubeconfig?: string
  /** A context of the kubeconfig; default its current context. */
  context?: string
  /** A ready KubeConfig (tests, or a caller that built one); wins over everything else. */
  kubeConfig?: KubeConfig
  /** Where KUBERNETES_SERVICE_HOST/PORT, KUBECONFIG and HOME are read (in-cluster config reads process.env). */
  env?: NodeJS.ProcessEnv
  /** Prefix of the service account directory (tests: a temp dir holding var/run/secrets/…). */
  rootPrefix?: string
  /**
   * What to do when no configuration is found, for the error message (default: `fnr serve`'s
   * "pass --kubeconfig or disable the pod runtime (--disable-runtimes=pod)").
   */
  missingConfigHint?: string
}

const SERVE_CONFIG_HINT = 'pass --kubeconfig or disable the pod runtime (--disable-runtimes=pod)'

export interface KubeClients {
  k8s: ClientNode
  kubeConfig: KubeConfig
  core: CoreV1Api
  /** How the configuration was found. */
  source: 'given' | 'kubeconfig' | 'in-cluster'
  /** The API server URL. */
  server: string
  /** The namespace of the current context (kubeconfig) or of the service account (in cluster), if any. */
  contextNamespace?: string
}

function inClusterAvailable(env: NodeJS.ProcessEnv, saDir: string): boolean {
  return !!env.KUBERNETES_SERVICE_HOST && !!env.KUBERNETES_SERVICE_PORT && existsSync(path.join(saDir, 'token'))
}

function readServiceAccountNamespace(saDir: string): string | undefined {
  try {
    return readFileSync(path.join(saDir, 'namespace'), 'utf8').trim() || undefined
  } catch {
    return undefined
  }
}

/** Builds the clients; FnrError('Config') when there is no usable configuration. */
export async function connectKube(options: KubeConnectOptions = {}): Promise<KubeClients> {
  const env = options.env ?? process.env
  const rootPrefix = options.rootPrefix ?? ''
  const saDir = `${rootPrefix}${SERVICE_ACCOUNT_DIR}`
  const k8s = await loadClientNode()
  let kubeConfig: KubeConfig
  let source: KubeClients['source']
  let contextNamespace: string | undefined
  if (options.kubeConfig) {
    kubeConfig = options.kubeConfig
    source = 'given'
  } else {
    kubeConfig = new k8s.KubeConfig()
    try {
      if (options.kubeconfig) {
        await loadKubeconfigFile(kubeConfig, options.kubeconfig)
        source = 'kubeconfig'
      } else if (inClusterAvailable(env, saDir)) {
        kubeConfig.loadFromCluster(rootPrefix)
        source = 'in-cluster'
        contextNamespace = readServiceAccountNamespace(saDir)
      } else {
        const files = (env.KUBECONFIG ?? '').split(path.delimiter).filter((f) => f !== '')
        const home = path.join(env.HOME || os.homedir(), '.kube', 'config')
        const existing = files.length > 0 ? files.filter((f) => existsSync(f)) : existsSync(home) ? [home] : []
        if (existing.length === 0) {
          throw new FnrError(
            'Config',
            files.length > 0
              ? `no kubeconfig found: none of the files in KUBECONFIG exists (${files.join(path.delimiter)})`
              : `no Kubernetes configuration found: not running in a cluster, KUBECONFIG is not set and ~/.kube/config does not exist; ${options.missingConfigHint ?? SERVE_CONFIG_HINT}`,
          )
        }
        await loadKubeconfigFile(kubeConfig, existing[0]!)
        // As kubectl: the first file that sets current-context wins.
        let current = kubeConfig.getCurrentContext()
        for (const extra of existing.slice(1)) {
          const more = new k8s.KubeConfig()
          await loadKubeconfigFile(more, extra)
          kubeConfig.mergeConfig(more)
          current ||= more.getCurrentContext()
        }
        if (current) kubeConfig.setCurrentContext(current)
        source = 'kubeconfig'
      }
    } catch (err) {
      if (err instanceof FnrError) throw err
      throw new FnrError('Config', `cannot load the Kubernetes configuration: ${firstLineOf(err)}`, {cause: err})
    }
  }
  // One connection pool per identity, idle sockets closed after a few seconds (dispatcher.ts).
  shareConnections(kubeConfig, k8s.UndiciAgent)
  if (options.context) {
    if (!kubeConfig.getContextObject(options.context)) throw new FnrError('Config', `kubeconfig has no context ${JSON.stringify(options.context)}`)
    kubeConfig.setCurrentContext(options.context)
  }
  const cluster = kubeConfig.getCurrentCluster()
  if (!cluster) throw new FnrError('Config', 'the Kubernetes configuration has no current cluster (set a current-context)')
  if (source !== 'in-cluster') {
    const ctx = kubeConfig.getContextObject(kubeConfig.getCurrentContext())
    contextNamespace = ctx?.namespace || undefined
  }
  return {k8s, kubeConfig, core: kubeConfig.makeApiClient(k8s.CoreV1Api), source, server: cluster.server, contextNamespace}
}

/**
 * The namespace the runner itself lives in (where the pod template ConfigMap is read, as upstream):
 * the service account's namespace, else $POD_NAMESPACE, else the context's namespace, else
 * porch-system (upstream's fallback).
 */
export function runnerNamespace(clients: Pick<KubeClients, 'contextNamespace' | 'source'>, env: NodeJS.ProcessEnv = process.env, saDir = SERVICE_ACCOUNT_DIR): string {
  return readServiceAccountNamespace(saDir) ?? (env.POD_NAMESPACE || undefined) ?? clients.contextNamespace ?? 'porch-system'
}

function firstLineOf(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err)
  return text.split('\n', 1)[0]!.slice(0, 300)
}

/** kubeconfigs with many clusters and embedded certificates run to a few MiB at most. */
const MAX_KUBECONFIG_BYTES = 16 * 1024 * 1024

/**
 * KubeConfig.loadFromFile through the safe reader (regular files only, bounded): client-node's own
 * read blocks for ever on a FIFO and reads /dev/zero until memory runs out. Relative paths in the
 * file are made absolute against its folder, as loadFromFile does.
 */
async function loadKubeconfigFile(kubeConfig: KubeConfig, file: string): Promise<void> {
  const text = await readConfigFile(file, {label: `kubeconfig ${file} cannot be read`, maxBytes: MAX_KUBECONFIG_BYTES})
  kubeConfig.loadFromString(text.toString('utf8'))
  kubeConfig.makePathsAbsolute(path.dirname(file))
}
