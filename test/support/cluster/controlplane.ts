/**
 * A real Kubernetes control plane on loopback: etcd, kube-apiserver and kube-controller-manager built from Go
 * modules (scripts/cluster-build.mjs), plus the LocalKubelet (../k8s/kubelet.ts) as its node. Used by
 * `npm run cluster` (scripts/cluster.mjs) and by the tests (./shared.ts). See docs/cluster.md.
 *
 * Every process binds 127.0.0.1 on free ports; its state (certificates, etcd data, logs, kubeconfig) lives in
 * one directory that stop() removes.
 */
import type { ChildProcess } from 'node:child_process';
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, openSync, closeSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { KubeRestClient } from '../k8s/client.js';
import type { LocalKubeletOptions } from '../k8s/kubelet.js';
import { LocalKubelet } from '../k8s/kubelet.js';
import { RuncRuntime, type RuncRuntimeOptions } from '../node/runtime.js';
// @ts-expect-error plain ESM script without types
import { buildClusterBinaries, clusterBinaryPaths, DEBIAN_ETCD } from '../../../scripts/cluster-build.mjs';

const run = promisify(execFile);

export interface ClusterBinaries {
  apiserver: string;
  controllerManager: string;
  scheduler: string;
  etcd: string;
}

export interface ControlPlaneOptions {
  /** State directory (created; removed by stop()). */
  dir: string;
  /** Build the binaries when missing (default true). */
  build?: boolean;
  /** Run a node (the LocalKubelet) too (default true); its options without `api`. */
  kubelet?: false | Omit<LocalKubeletOptions, 'api'>;
  /**
   * Who runs the node's pods: `'runc'` (real images under runc, a network namespace and a 198.18.0.0/15 address per
   * pod, test/support/node; pods whose images are all in the kubelet's imageMap still run as host processes) or
   * `'process'` (host processes on 127.x addresses only). Default: $FNR_CLUSTER_NODE, else `'runc'`.
   */
  node?: 'runc' | 'process';
  /** Options of the runc node (with node 'runc'). */
  runc?: RuncRuntimeOptions;
  /**
   * Schedule pods with kube-scheduler (default true; $FNR_CLUSTER_SCHEDULER=node turns it off). Without it the node
   * binds every pending pod to itself, as before.
   */
  scheduler?: boolean;
  /**
   * kube-apiserver's `--enable-aggregator-routing` (default false; $FNR_CLUSTER_AGGREGATOR_ROUTING=1 turns it on): the
   * aggregator then sends an APIService's requests to an address from its Service's EndpointSlices instead of the
   * Service itself. EndpointSlices may not hold loopback addresses and that routing refuses ExternalName Services, so
   * an APIService backed by a server on loopback (an ExternalName Service `localhost`, `serveAggregatedApi`) needs it
   * off; a pod-backed one (runc pod addresses, reachable from the host) works either way with it on, since nothing
   * routes ClusterIPs here. See docs/cluster.md, "The aggregation layer".
   */
  aggregatorRouting?: boolean;
  /** Progress lines. */
  log?: (msg: string) => void;
}

export interface ControlPlane {
  dir: string;
  url: string;
  /** PEM of the cluster CA (the apiserver's serving cert is signed by it). */
  caPem: string;
  /** PEM of the front-proxy CA: kube-apiserver's client certificate for aggregated APIs is signed by it. */
  frontProxyCaPem: string;
  /** The admin's bearer token (group system:masters). */
  adminToken: string;
  /** Admin kubeconfig (context `fnr-cluster`). */
  kubeconfigPath: string;
  kubelet: LocalKubelet | undefined;
  /** The runc node behind the kubelet (node 'runc'), or undefined. */
  runtime: RuncRuntime | undefined;
  /** Process ids of etcd, kube-apiserver, kube-controller-manager and kube-scheduler (when it runs). */
  pids: Record<string, number>;
  /** A serving certificate signed by the cluster CA for these DNS names (and IP 127.0.0.1): PEMs. */
  servingCert(dnsNames: string[]): Promise<{ cert: string; key: string }>;
  /** A kubeconfig for any bearer token (a ServiceAccount's, from `kubectl create token`). */
  kubeconfigFor(token: string, namespace?: string): string;
  /** Runs the real kubectl with the admin kubeconfig. */
  kubectl(args: string[], options?: { input?: string; timeoutMs?: number }): Promise<{ code: number; stdout: string; stderr: string }>;
  /** The apiserver's audit events so far (level Metadata, stage ResponseComplete/Panic), optionally filtered. */
  auditEvents(filter?: (e: AuditEvent) => boolean): Promise<AuditEvent[]>;
  /** Resident memory (KiB) of each control-plane process now. */
  rssKiB(): Promise<Record<string, number>>;
  stop(): Promise<void>;
}

export interface AuditEvent {
  stage: string;
  verb: string;
  requestURI: string;
  user: { username: string; groups?: string[] };
  objectRef?: { resource?: string; subresource?: string; namespace?: string; name?: string; apiGroup?: string };
  responseStatus?: { code?: number; message?: string; reason?: string };
  annotations?: Record<string, string>;
}

export const NODE_NAME = 'fnr-node';
/** The CN of kube-apiserver's client certificate for the node's kubelet API (pods/log). */
export const KUBELET_CLIENT_CN = 'kube-apiserver-kubelet-client';
/** Service ClusterIPs are allocated from this range; routed from inside runc pods only (docs/node.md "Services from inside a pod"). */
export const SERVICE_CIDR = '10.96.0.0/16';
/** The `kubernetes` Service's ClusterIP (the range's first address, as kube-apiserver allocates it); in the serving certificate. */
export const KUBERNETES_SERVICE_IP = '10.96.0.1';
/** The CN of kube-apiserver's front-proxy client certificate (its only `--requestheader-allowed-names`). */
export const FRONT_PROXY_CLIENT_CN = 'front-proxy-client';

/** A free TCP port on 127.0.0.1 (closed again before use: the usual small race). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

/** The binaries, built when missing (minutes on a cold machine; cached in .cache/peers). */
export function clusterBinaries(build = true): ClusterBinaries {
  if (build) return buildClusterBinaries() as ClusterBinaries;
  const paths = clusterBinaryPaths() as ClusterBinaries;
  for (const p of Object.values(paths)) if (!existsSync(p)) throw new Error(`${p} is not built: run npm run cluster -- build (or scripts/setup.mjs --test)`);
  return paths;
}

async function openssl(dir: string, args: string[]): Promise<void> {
  await run('openssl', args, { cwd: dir });
}

/** CA, apiserver serving cert, service-account signing key pair. */
async function makeCerts(dir: string): Promise<void> {
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  await openssl(dir, ['req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '30', '-subj', '/CN=fnr-cluster-ca',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
  await openssl(dir, ['req', ...ec, '-keyout', 'apiserver.key', '-out', 'apiserver.csr', '-subj', '/CN=kube-apiserver']);
  await writeFile(join(dir, 'apiserver.ext'),
    `subjectAltName=IP:127.0.0.1,IP:${KUBERNETES_SERVICE_IP},DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\n` +
    'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n');
  await openssl(dir, ['x509', '-req', '-in', 'apiserver.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'apiserver.crt', '-days', '30', '-extfile', 'apiserver.ext']);
  // kube-apiserver's client certificate for the node's kubelet API (--kubelet-client-certificate), and the node's
  // serving certificate for it (kube-apiserver checks it against --kubelet-certificate-authority).
  await openssl(dir, ['req', ...ec, '-keyout', 'kubelet-client.key', '-out', 'kubelet-client.csr', '-subj', `/O=system:masters/CN=${KUBELET_CLIENT_CN}`]);
  await writeFile(join(dir, 'kubelet-client.ext'), 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n');
  await openssl(dir, ['x509', '-req', '-in', 'kubelet-client.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'kubelet-client.crt', '-days', '30', '-extfile', 'kubelet-client.ext']);
  await openssl(dir, ['req', ...ec, '-keyout', 'kubelet.key', '-out', 'kubelet.csr', '-subj', `/CN=${NODE_NAME}`]);
  await writeFile(join(dir, 'kubelet.ext'), `subjectAltName=IP:127.0.0.1,DNS:${NODE_NAME}\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n`);
  await openssl(dir, ['x509', '-req', '-in', 'kubelet.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'kubelet.crt', '-days', '30', '-extfile', 'kubelet.ext']);
  // The aggregation layer: a CA of its own for kube-apiserver's client certificate towards aggregated API servers
  // (--proxy-client-cert-file); they trust the identity headers of a request only with a certificate from it.
  await openssl(dir, ['req', '-x509', ...ec, '-keyout', 'front-proxy-ca.key', '-out', 'front-proxy-ca.crt', '-days', '30', '-subj', '/CN=fnr-front-proxy-ca',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
  await openssl(dir, ['req', ...ec, '-keyout', 'front-proxy-client.key', '-out', 'front-proxy-client.csr', '-subj', `/CN=${FRONT_PROXY_CLIENT_CN}`]);
  await openssl(dir, ['x509', '-req', '-in', 'front-proxy-client.csr', '-CA', 'front-proxy-ca.crt', '-CAkey', 'front-proxy-ca.key', '-CAcreateserial', '-out', 'front-proxy-client.crt', '-days', '30', '-extfile', 'kubelet-client.ext']);
  await openssl(dir, ['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-out', 'sa.key']);
  await openssl(dir, ['pkey', '-in', 'sa.key', '-pubout', '-out', 'sa.pub']);
}

/** A serving certificate from the cluster CA (in `dir`) for `dnsNames` and 127.0.0.1. */
async function servingCert(dir: string, dnsNames: string[]): Promise<{ cert: string; key: string }> {
  const base = `serving-${randomBytes(4).toString('hex')}`;
  await openssl(dir, ['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', `${base}.key`, '-out', `${base}.csr`, '-subj', `/CN=${dnsNames[0] ?? 'localhost'}`]);
  await writeFile(join(dir, `${base}.ext`), `subjectAltName=${[...dnsNames.map((n) => `DNS:${n}`), 'IP:127.0.0.1'].join(',')}\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n`);
  await openssl(dir, ['x509', '-req', '-in', `${base}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', `${base}.crt`, '-days', '30', '-extfile', `${base}.ext`]);
  return { cert: await readFile(join(dir, `${base}.crt`), 'utf8'), key: await readFile(join(dir, `${base}.key`), 'utf8') };
}

function kubeconfig(url: string, caPem: string, token: string, namespace = 'default'): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'fnr-cluster', cluster: { server: url, 'certificate-authority-data': Buffer.from(caPem).toString('base64') } }],
    users: [{ name: 'fnr-cluster', user: { token } }],
    contexts: [{ name: 'fnr-cluster', context: { cluster: 'fnr-cluster', user: 'fnr-cluster', namespace } }],
    'current-context': 'fnr-cluster',
  }, null, 2);
}

function startProcess(name: string, bin: string, args: string[], dir: string): ChildProcess {
  const logFd = openSync(join(dir, `${name}.log`), 'a');
  const child = spawn(bin, args, { cwd: dir, stdio: ['ignore', logFd, logFd], detached: true });
  closeSync(logFd);
  child.on('error', () => undefined);
  child.unref();
  return child;
}

async function lastLines(file: string, n = 15): Promise<string> {
  try {
    return (await readFile(file, 'utf8')).trimEnd().split('\n').slice(-n).join('\n');
  } catch {
    return '';
  }
}

async function waitFor(what: string, timeoutMs: number, check: () => Promise<boolean>, child?: ChildProcess, logFile?: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child && child.exitCode !== null) throw new Error(`${what}: the process exited with code ${child.exitCode}\n${logFile ? await lastLines(logFile) : ''}`);
    try {
      if (await check()) return;
    } catch {
      // not yet
    }
    if (Date.now() > deadline) throw new Error(`${what}: not ready within ${timeoutMs / 1000} s\n${logFile ? await lastLines(logFile) : ''}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function stopProcess(child: ChildProcess | undefined, graceMs = 5000): Promise<void> {
  if (!child?.pid || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    process.kill(-child.pid, 'SIGTERM');
  } catch {
    return;
  }
  const timer = setTimeout(() => {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // gone
    }
  }, graceMs);
  await exited;
  clearTimeout(timer);
}

/** Every control-plane process group of this Node process, killed on exit as a last resort. */
const liveGroups = new Set<number>();
process.on('exit', () => {
  for (const pgid of liveGroups) {
    try {
      process.kill(-pgid, 'SIGKILL');
    } catch {
      // gone
    }
  }
});

/** Starts etcd, kube-apiserver, kube-controller-manager and (by default) the node; resolves when all are ready. */
export async function startControlPlane(options: ControlPlaneOptions): Promise<ControlPlane> {
  const log = options.log ?? (() => undefined);
  const dir = options.dir;
  const bins = clusterBinaries(options.build ?? true);
  await mkdir(dir, { recursive: true });
  const children: Record<string, ChildProcess> = {};
  let kubelet: LocalKubelet | undefined;
  let runtime: RuncRuntime | undefined;
  let client: KubeRestClient | undefined;
  const stopAll = async (): Promise<void> => {
    await kubelet?.stop().catch(() => undefined);
    await runtime?.stop().catch(() => undefined);
    client?.close();
    for (const name of ['kube-scheduler', 'kube-controller-manager', 'kube-apiserver', 'etcd']) {
      await stopProcess(children[name]);
      if (children[name]?.pid) liveGroups.delete(children[name].pid!);
    }
  };
  try {
    const started = Date.now();
    await makeCerts(dir);
    const caPem = await readFile(join(dir, 'ca.crt'), 'utf8');
    const frontProxyCaPem = await readFile(join(dir, 'front-proxy-ca.crt'), 'utf8');
    const aggregatorRouting = options.aggregatorRouting ?? ['1', 'true'].includes(process.env.FNR_CLUSTER_AGGREGATOR_ROUTING ?? '');
    const adminToken = randomBytes(24).toString('hex');
    // Audit: every request's user, verb, resource and response code (tests read it: auditEvents()), except the
    // admin's (the controller manager, the node and the tests' own setup use the admin token).
    await writeFile(join(dir, 'audit-policy.yaml'), 'apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n  - level: None\n    users: [fnr-admin]\n  - level: Metadata\n');
    await writeFile(join(dir, 'tokens.csv'), `${adminToken},fnr-admin,fnr-admin,"system:masters"\n`, { mode: 0o600 });
    const [etcdPort, etcdPeerPort, apiPort] = await Promise.all([freePort(), freePort(), freePort()]);
    log(`certificates ready (${Date.now() - started} ms)`);

    // etcd
    const etcdUrl = `http://127.0.0.1:${etcdPort}`;
    const peerUrl = `http://127.0.0.1:${etcdPeerPort}`;
    children.etcd = startProcess('etcd', bins.etcd, [
      '--name', 'fnr', '--data-dir', join(dir, 'etcd'),
      '--listen-client-urls', etcdUrl, '--advertise-client-urls', etcdUrl,
      '--listen-peer-urls', peerUrl, '--initial-advertise-peer-urls', peerUrl, '--initial-cluster', `fnr=${peerUrl}`,
      '--logger', 'zap', '--log-level', 'warn', '--quota-backend-bytes', String(2 * 1024 ** 3),
      ...(bins.etcd === DEBIAN_ETCD ? [] : ['--unsafe-no-fsync']),
    ], dir);
    liveGroups.add(children.etcd.pid!);
    await waitFor('etcd', 20_000, async () => (await fetch(`${etcdUrl}/health`)).ok, children.etcd, join(dir, 'etcd.log'));
    log(`etcd ready on ${etcdUrl} (${Date.now() - started} ms)`);

    // kube-apiserver
    const url = `https://127.0.0.1:${apiPort}`;
    children['kube-apiserver'] = startProcess('kube-apiserver', bins.apiserver, [
      `--etcd-servers=${etcdUrl}`,
      '--bind-address=127.0.0.1', '--advertise-address=127.0.0.1', `--secure-port=${apiPort}`,
      '--tls-cert-file=apiserver.crt', '--tls-private-key-file=apiserver.key', '--client-ca-file=ca.crt',
      '--token-auth-file=tokens.csv',
      '--authorization-mode=Node,RBAC',
      '--enable-admission-plugins=NamespaceLifecycle,LimitRanger,ServiceAccount,PodSecurity,ResourceQuota,NodeRestriction,DefaultTolerationSeconds,Priority,RuntimeClass,MutatingAdmissionWebhook,ValidatingAdmissionPolicy,ValidatingAdmissionWebhook',
      '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
      '--service-account-key-file=sa.pub', '--service-account-signing-key-file=sa.key',
      `--service-cluster-ip-range=${SERVICE_CIDR}`,
      // The apiserver's own Endpoints would hold 127.0.0.1, which Endpoints validation rejects.
      '--endpoint-reconciler-type=none',
      // pods/log: kube-apiserver calls the node's kubelet API (its InternalIP and daemonEndpoints port) over TLS.
      '--kubelet-client-certificate=kubelet-client.crt', '--kubelet-client-key=kubelet-client.key',
      '--kubelet-certificate-authority=ca.crt', '--kubelet-preferred-address-types=InternalIP',
      // The aggregation layer (APIServices): kube-apiserver authenticates to an aggregated API server with the
      // front-proxy client certificate and passes the user on in these headers, which that server trusts from a
      // certificate of the front-proxy CA named front-proxy-client (published in kube-system's
      // extension-apiserver-authentication ConfigMap).
      '--requestheader-client-ca-file=front-proxy-ca.crt', `--requestheader-allowed-names=${FRONT_PROXY_CLIENT_CN}`,
      '--requestheader-username-headers=X-Remote-User', '--requestheader-group-headers=X-Remote-Group',
      '--requestheader-extra-headers-prefix=X-Remote-Extra-',
      '--proxy-client-cert-file=front-proxy-client.crt', '--proxy-client-key-file=front-proxy-client.key',
      `--enable-aggregator-routing=${aggregatorRouting}`,
      '--audit-policy-file=audit-policy.yaml', '--audit-log-path=audit.log', '--audit-log-format=json', '--audit-log-mode=blocking',
      '--profiling=false', '--v=1',
    ], dir);
    liveGroups.add(children['kube-apiserver'].pid!);
    client = new KubeRestClient({ url, token: adminToken, ca: caPem });
    await waitFor('kube-apiserver', 60_000, async () => (await client!.raw('GET', '/readyz')).code === 200, children['kube-apiserver'], join(dir, 'kube-apiserver.log'));
    log(`kube-apiserver ready on ${url} (${Date.now() - started} ms)`);

    const kubeconfigPath = join(dir, 'kubeconfig');
    await writeFile(kubeconfigPath, kubeconfig(url, caPem, adminToken), { mode: 0o600 });

    // kube-controller-manager
    children['kube-controller-manager'] = startProcess('kube-controller-manager', bins.controllerManager, [
      `--kubeconfig=${kubeconfigPath}`,
      '--controllers=serviceaccount-token-controller,serviceaccount-controller,namespace-controller,garbage-collector-controller,endpointslice-controller,endpointslice-mirroring-controller,endpoints-controller,root-ca-certificate-publisher-controller,replicaset-controller,deployment-controller,resourcequota-controller,ttl-after-finished-controller,job-controller,clusterrole-aggregation-controller',
      '--service-account-private-key-file=sa.key', '--root-ca-file=ca.crt',
      '--leader-elect=false', '--secure-port=0', '--profiling=false', '--v=1',
      '--concurrent-gc-syncs=5', '--concurrent-namespace-syncs=5',
    ], dir);
    liveGroups.add(children['kube-controller-manager'].pid!);
    // Ready once the default ServiceAccount and the root CA ConfigMap exist in `default`.
    await waitFor('kube-controller-manager', 60_000, async () =>
      (await client!.raw('GET', '/api/v1/namespaces/default/serviceaccounts/default')).code === 200 &&
      (await client!.raw('GET', '/api/v1/namespaces/default/configmaps/kube-root-ca.crt')).code === 200,
    children['kube-controller-manager'], join(dir, 'kube-controller-manager.log'));
    log(`kube-controller-manager ready (${Date.now() - started} ms)`);

    // kube-scheduler: binds pods to the node (which then no longer binds them itself).
    const scheduler = options.scheduler ?? process.env.FNR_CLUSTER_SCHEDULER !== 'node';
    if (scheduler) {
      const schedulerPort = await freePort();
      children['kube-scheduler'] = startProcess('kube-scheduler', bins.scheduler, [
        `--kubeconfig=${kubeconfigPath}`, `--authentication-kubeconfig=${kubeconfigPath}`, `--authorization-kubeconfig=${kubeconfigPath}`,
        '--leader-elect=false', '--bind-address=127.0.0.1', `--secure-port=${schedulerPort}`, '--profiling=false', '--v=1',
      ], dir);
      liveGroups.add(children['kube-scheduler'].pid!);
      // /readyz is open to anyone (--authorization-always-allow-paths); its serving cert is self-signed.
      const { request } = await import('node:https');
      const readyz = (): Promise<boolean> => new Promise((resolve) => {
        const req = request({ host: '127.0.0.1', port: schedulerPort, path: '/readyz', rejectUnauthorized: false, timeout: 2000 }, (res) => {
          res.resume();
          resolve(res.statusCode === 200);
        });
        req.on('error', () => resolve(false));
        req.on('timeout', () => req.destroy());
        req.end();
      });
      await waitFor('kube-scheduler', 60_000, readyz, children['kube-scheduler'], join(dir, 'kube-scheduler.log'));
      log(`kube-scheduler ready (${Date.now() - started} ms)`);
    }

    if (options.kubelet !== false) {
      const node = options.node ?? nodeKind(process.env.FNR_CLUSTER_NODE);
      if (node === 'runc') runtime = await RuncRuntime.create({ serviceRouting: { apiServer: `127.0.0.1:${apiPort}` }, ...options.runc });
      kubelet = new LocalKubelet({
        nodeName: NODE_NAME,
        // Endpoints and EndpointSlices are the controller manager's.
        registerNode: true,
        // kube-scheduler binds pods when it runs.
        schedule: !scheduler,
        server: {
          cert: await readFile(join(dir, 'kubelet.crt'), 'utf8'),
          key: await readFile(join(dir, 'kubelet.key'), 'utf8'),
          clientCa: caPem,
          allowedClients: [KUBELET_CLIENT_CN],
        },
        ...(options.kubelet ?? {}),
        ...(runtime ? { runtime } : {}),
        api: { url, token: adminToken, ca: caPem },
      });
      await kubelet.start();
      log(`node ${kubelet.nodeName} registered, pods run ${runtime ? 'under runc' : 'as host processes'} (${Date.now() - started} ms)`);
    }

    const pids = Object.fromEntries(Object.entries(children).map(([k, c]) => [k, c.pid!]));
    let stopped: Promise<void> | undefined;
    return {
      dir,
      url,
      caPem,
      frontProxyCaPem,
      adminToken,
      kubeconfigPath,
      kubelet,
      runtime,
      pids,
      servingCert: (dnsNames) => servingCert(dir, dnsNames),
      kubeconfigFor: (token, namespace) => kubeconfig(url, caPem, token, namespace),
      kubectl: (args, o = {}) => kubectl(kubeconfigPath, dir, args, o),
      auditEvents: async (filter) => {
        const text = await readFile(join(dir, 'audit.log'), 'utf8').catch(() => '');
        const events = text.split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as AuditEvent);
        return filter ? events.filter(filter) : events;
      },
      rssKiB: async () => {
        const out: Record<string, number> = {};
        for (const [name, pid] of Object.entries(pids)) {
          const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
          const m = /VmRSS:\s+(\d+)/.exec(status);
          if (m) out[name] = Number(m[1]);
        }
        return out;
      },
      stop: () => (stopped ??= (async () => {
        await stopAll();
        await rm(dir, { recursive: true, force: true });
      })()),
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}

/** FNR_CLUSTER_NODE: `runc` (default) or `process`. */
/**
 * `kubectl wait --for=condition=Established` on CRDS, again while the CRD has no conditions yet:
 * kubectl then fails at once with ".status.conditions accessor error: <nil> is of the type <nil>"
 * instead of waiting (the apiserver writes the status a moment after the create). The last result.
 */
export async function waitCrdsEstablished(cp: Pick<ControlPlane, 'kubectl'>, crds: string[], timeoutMs = 60_000): Promise<{ code: number; stdout: string; stderr: string }> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const left = Math.max(1, Math.ceil((until - Date.now()) / 1000));
    const r = await cp.kubectl(['wait', '--for=condition=Established', `--timeout=${left}s`, ...crds.map((c) => `crd/${c}`)]);
    if (r.code === 0 || !/accessor error: <nil>/.test(r.stderr) || Date.now() > until) return r;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

export function nodeKind(value: string | undefined): 'runc' | 'process' {
  if (value === undefined || value === '' || value === 'runc') return 'runc';
  if (value === 'process') return 'process';
  throw new Error(`FNR_CLUSTER_NODE=${value}: expected runc or process`);
}

/** The real kubectl, with a kubeconfig and a cache dir inside the state dir. */
export function kubectl(kubeconfigPath: string, dir: string, args: string[], o: { input?: string; timeoutMs?: number } = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile('kubectl', ['--kubeconfig', kubeconfigPath, '--cache-dir', join(dir, 'kubectl-cache'), ...args], { timeout: o.timeoutMs ?? 60_000, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof (err as { code?: unknown }).code === 'number' ? ((err as { code: number }).code) : 1) : 0, stdout, stderr });
    });
    if (o.input !== undefined) child.stdin?.end(o.input);
    else child.stdin?.end();
  });
}
