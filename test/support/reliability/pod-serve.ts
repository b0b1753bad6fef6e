/**
 * `fnr serve` as a real child process with the pod runtime on the real control plane: the cluster
 * pod bed (../pods/cluster-bed.ts: kube-apiserver, etcd, the controllers and the scheduler, the
 * control plane's node running the real wrapper server, a fault proxy in front of kube-apiserver
 * through which serve talks), plus a real TLS
 * registry (docker-registry, htpasswd) holding the function images, since a child process learns
 * each image's entrypoint from a registry like in production. serve reaches it with
 * --enable-private-registries (auth file) and --enable-private-registries-tls (its CA), and the
 * control plane through --kubeconfig (the bed's, through the proxy) and --pod-address=pod-ip.
 *
 * Images: <registry>/fn/<name>:v1 for name in cat, stderr, fail, gate (the pod bed's scripts) and
 * fastcat (/bin/cat itself: the cheapest function, for load), and slow (cat, but its wrapper
 * server starts only after 30 s: a pod that stays not ready), entrypoint /usr/local/bin/function.
 */
import {readFileSync, readdirSync} from 'node:fs'
import path from 'node:path'

import type {V1Pod, V1Service} from '@kubernetes/client-node'

import {listPods, listServices, startClusterPodBed, wrapped, type ClusterPodBed} from '../pods/cluster-bed.js'
import {FUNCTION_PATH, WRAPPER_IMAGE, wrapperCommand} from '../pods/index.js'
import {pushImage} from '../registry/fixtures.js'
import {TestRegistry} from '../registry/registry.js'
import {isSpawnerProcess, resourceUsage} from './processes.js'
import {freePort, startServeChild, type ServeChild} from './serve-process.js'

export const POD_SERVE_FUNCTIONS = ['cat', 'stderr', 'fail', 'gate', 'fastcat', 'slow'] as const
export type PodServeFunction = (typeof POD_SERVE_FUNCTIONS)[number]

export interface PodServeBed {
  pb: ClusterPodBed
  registry: TestRegistry
  authFile: string
  image(name: PodServeFunction): string
  /** Starts `fnr serve` (pod runtime only) for namespace `ns` as runner `owner`. */
  start(ns: string, owner: string, extraArgs?: string[], port?: number): Promise<ServeChild>
  stop(): Promise<void>
}

export async function startPodServeBed(): Promise<PodServeBed> {
  const registry = await TestRegistry.start({mode: 'tls'})
  let pb: ClusterPodBed | undefined
  try {
    const authFile = await registry.writeAuthFile('testuser', 'testpass')
    // One image, four tags: the function is chosen by the kubelet's image map, not the image content.
    for (const name of POD_SERVE_FUNCTIONS) await pushImage(registry, `fn/${name}:v1`, {entrypoint: [FUNCTION_PATH], files: {'fn.txt': `${name}\n`}}, authFile)
    pb = await startClusterPodBed()
    const image = (name: PodServeFunction): string => `${registry.host}/fn/${name}:v1`
    for (const name of POD_SERVE_FUNCTIONS) {
      const target = name === 'fastcat' ? '/bin/cat' : path.join(pb.dir, 'functions', name === 'slow' ? 'cat' : name)
      // (the node has no wrapper mapping of its own: every image maps the wrapper server's path)
      const wrapper = name === 'slow' ? ['/bin/sh', '-c', 'sleep 30; exec "$0" "$@"', ...wrapperCommand()] : wrapperCommand()
      pb.kubelet.setImage(image(name), wrapped({[FUNCTION_PATH]: target}, wrapper))
    }
    const bed = pb
    return {
      pb: bed,
      registry,
      authFile,
      image,
      start: async (ns, owner, extraArgs = [], port) =>
        startServeChild(
          port ?? (await freePort()),
          [
            '--disable-runtimes=exec',
            ...(extraArgs.some((a) => a.startsWith('--log-level')) ? [] : ['--log-level=3']),
            `--kubeconfig=${bed.kubeconfigPath}`,
            `--pod-namespace=${ns}`,
            '--pod-address=pod-ip',
            '--warm-up-pod-cache=false',
            '--pod-cache-config=',
            '--enable-private-registries=true',
            `--registry-auth-secret-path=${authFile}`,
            '--enable-private-registries-tls=true',
            `--tls-secret-path=${registry.certDir}`,
            ...extraArgs,
          ],
          {WRAPPER_SERVER_IMAGE: WRAPPER_IMAGE, POD_NAME: owner},
          60_000,
        ),
      stop: async () => {
        await bed.stop()
        await registry.stop()
      },
    }
  } catch (err) {
    await pb?.stop()
    await registry.stop()
    throw err
  }
}

/** What a namespace holds and what the processes involved use, for before/after comparisons. */
export interface PodFootprint {
  pods: number
  services: number
  /** Live wrapper processes the kubelet runs for the namespace. */
  podProcesses: number
  /** Open file descriptors of the serve process. */
  serveFds: number
  serveRssMiB: number
  /** Processes whose parent is the serve process (the pod runtime spawns none). */
  serveChildren: number
  /** Live processes in the pods' process groups besides the wrapper servers (function processes). */
  functionProcesses: number
}

/** Live (non-zombie) processes: pid, parent and process group. */
function liveProcesses(): Array<{pid: number; ppid: number; pgid: number}> {
  const out: Array<{pid: number; ppid: number; pgid: number}> = []
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      const text = readFileSync(`/proc/${name}/stat`, 'utf8')
      const [state, ppid, pgid] = text.slice(text.lastIndexOf(')') + 2).split(' ')
      if (state !== 'Z' && state !== 'X') out.push({pid: Number(name), ppid: Number(ppid), pgid: Number(pgid)})
    } catch {
      // gone meanwhile
    }
  }
  return out
}

export async function podFootprint(pb: ClusterPodBed, ns: string, servePid: number): Promise<PodFootprint> {
  const [pods, services] = await Promise.all([listPods(pb, ns, {includeDeleting: true}), listServices(pb, ns)])
  const usage = resourceUsage(servePid)
  const live = liveProcesses()
  const podPids = new Set(pb.kubelet.podInfos().filter((p) => p.namespace === ns && p.pid !== undefined).map((p) => p.pid!))
  return {
    pods: pods.length,
    services: services.length,
    podProcesses: pb.kubelet.podInfos().filter((p) => p.namespace === ns && p.pid !== undefined).length,
    serveFds: usage.fds,
    serveRssMiB: Math.round(usage.rssKiB / 102.4) / 10,
    serveChildren: live.filter((p) => p.ppid === servePid).length,
    // the pod's processes besides the wrapper itself and its process spawner
    functionProcesses: live.filter((p) => podPids.has(p.pgid) && !podPids.has(p.pid) && !isSpawnerProcess(p.pid)).length,
  }
}

/**
 * The no-leak invariant of a namespace: every fnr pod is live (not deleting, not ended) and has
 * its Service, and every fnr Service has its pod; at most `maxPerImage` pods per image. Returns
 * what is wrong ([] when all is well).
 */
export async function leakProblems(pb: ClusterPodBed, ns: string, maxPerImage = 1): Promise<string[]> {
  const [pods, services]: [V1Pod[], V1Service[]] = await Promise.all([listPods(pb, ns, {includeDeleting: true}), listServices(pb, ns)])
  const problems: string[] = []
  const podNames = new Set(pods.map((p) => p.metadata!.name!))
  const perImage = new Map<string, number>()
  for (const p of pods) {
    const name = p.metadata!.name!
    if (p.metadata!.deletionTimestamp) problems.push(`pod ${name} is still being deleted`)
    if (p.status?.phase === 'Failed' || p.status?.phase === 'Succeeded') problems.push(`pod ${name} is ${p.status.phase}`)
    if (!services.some((s) => s.metadata!.name === name)) problems.push(`pod ${name} has no Service`)
    const img = p.metadata!.annotations?.['fnr.dev/image'] ?? '?'
    perImage.set(img, (perImage.get(img) ?? 0) + 1)
  }
  for (const [img, n] of perImage) if (n > maxPerImage) problems.push(`${n} pods for ${img} (limit ${maxPerImage})`)
  for (const s of services) if (!podNames.has(s.metadata!.name!)) problems.push(`Service ${s.metadata!.name} has no pod`)
  return problems
}
