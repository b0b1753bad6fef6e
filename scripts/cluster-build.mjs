// The real control plane's binaries (kube-apiserver, kube-controller-manager, kube-scheduler, etcd), built from Go
// modules as test peers (scripts/go-peers.mjs): test/peers/kube pins k8s.io/kubernetes, test/peers/etcd
// pins go.etcd.io/etcd/server/v3. Built once into .cache/peers/<name>/ and reused while the
// peer's go.mod/go.sum are unchanged. Only Node built-ins here: setup.mjs imports it before npm ci.
import {spawnSync} from 'node:child_process'
import path from 'node:path'
import {buildGoPeer, peerBinDir} from './go-peers.mjs'

import {readFileSync} from 'node:fs'
import {PEERS_SRC} from './go-peers.mjs'

/** The pinned k8s.io/kubernetes version (test/peers/kube/go.mod), stamped into the binaries as a release build would. */
export function pinnedKubeVersion() {
  const m = /k8s\.io\/kubernetes (v(\d+)\.(\d+)\.\d+)/.exec(readFileSync(path.join(PEERS_SRC, 'kube', 'go.mod'), 'utf8'))
  if (!m) throw new Error('test/peers/kube/go.mod does not require k8s.io/kubernetes')
  return {version: m[1], major: m[2], minor: m[3]}
}

function kubeLdflags() {
  const {version, major, minor} = pinnedKubeVersion()
  const x = (k, v) => `-X k8s.io/component-base/version.${k}=${v}`
  return [`-ldflags=-s -w ${x('gitVersion', version)} ${x('gitMajor', major)} ${x('gitMinor', minor)} ${x('gitTreeState', 'clean')}`]
}

export const KUBE_TARGETS = [
  {pkg: 'k8s.io/kubernetes/cmd/kube-apiserver', out: 'kube-apiserver'},
  {pkg: 'k8s.io/kubernetes/cmd/kube-controller-manager', out: 'kube-controller-manager'},
]
/**
 * kube-scheduler, from the same module: test/peers/kube-scheduler is a symlink to test/peers/kube, so it is the same
 * go.mod/go.sum but a build of its own (.cache/peers/kube-scheduler, own cache key and lock): adding it did not
 * change the key of the kube build that machines (and worktrees sharing .cache/peers) already have.
 */
export const SCHEDULER_TARGETS = [{pkg: 'k8s.io/kubernetes/cmd/kube-scheduler', out: 'kube-scheduler'}]
/**
 * etcd 3.6 built from go.etcd.io/etcd/server/v3 (test/peers/etcd), the default: kube-apiserver 1.37 needs etcd 3.5+
 * for watch progress requests (watches with allowWatchBookmarks) and consistent reads from its cache (docs/cluster.md).
 */
export const ETCD_TARGETS = [{pkg: 'go.etcd.io/etcd/server/v3', out: 'etcd'}]
/** Debian's etcd-server (3.4.x): only with FNR_ETCD=debian, as a fallback without the build. */
export const DEBIAN_ETCD = '/usr/bin/etcd'

/** FNR_ETCD: `build` (default: etcd 3.6 from its module) or `debian` (Debian's etcd 3.4). */
export function etcdKind(value = process.env.FNR_ETCD) {
  if (value === undefined || value === '' || value === 'build') return 'build'
  if (value === 'debian') return 'debian'
  throw new Error(`FNR_ETCD=${value}: expected build (etcd 3.6 from its module, the default) or debian (Debian's etcd 3.4)`)
}

const useBuiltEtcd = () => etcdKind() === 'build'

/** Builds (or reuses) every binary; returns their paths. */
export function buildClusterBinaries({log} = {}) {
  const opts = (flags) => (log ? {flags, log} : {flags})
  const kube = buildGoPeer('kube', KUBE_TARGETS, opts(kubeLdflags()))
  const scheduler = buildGoPeer('kube-scheduler', SCHEDULER_TARGETS, opts(kubeLdflags()))
  const etcd = useBuiltEtcd() ? buildGoPeer('etcd', ETCD_TARGETS, opts(['-ldflags=-s -w'])) : undefined
  return clusterBinaryPaths(kube, etcd, scheduler)
}

/** Where the binaries are (they may not be built yet). */
export function clusterBinaryPaths(kube = peerBinDir('kube'), etcd = useBuiltEtcd() ? peerBinDir('etcd') : undefined, scheduler = peerBinDir('kube-scheduler')) {
  return {
    apiserver: path.join(kube, 'kube-apiserver'),
    controllerManager: path.join(kube, 'kube-controller-manager'),
    scheduler: path.join(scheduler, 'kube-scheduler'),
    etcd: etcd ? path.join(etcd, 'etcd') : DEBIAN_ETCD,
  }
}

/** The Kubernetes version the binaries are built from (test/peers/kube/go.mod). */
export function kubeVersion(bin = clusterBinaryPaths().apiserver) {
  const r = spawnSync(bin, ['--version'], {encoding: 'utf8'})
  return r.status === 0 ? r.stdout.trim() : undefined
}
