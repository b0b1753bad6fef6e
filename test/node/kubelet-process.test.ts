/**
 * LocalKubelet's host-process mode on the real control plane: pods whose images are all mapped (`setImage`) run as
 * host processes on the control plane's node (`cp.kubelet`, bound there by kube-scheduler), on a loopback address of
 * their own; status, graceful deletion and `pods/log` (kube-apiserver to the node's kubelet API) go through
 * kube-apiserver. Scheduling off and stop() need a kubelet of their own: a second LocalKubelet on the same control
 * plane, its pods bound to it with spec.nodeName.
 *
 * Not here: Services' Endpoints. The LocalKubelet's own endpoints controller went with the in-process API server;
 * kube-controller-manager maintains Endpoints and EndpointSlices on the real control plane, covered by
 * test/cluster/services.test.ts (a Service's EndpointSlice lists its ready runc pod) and
 * test/cluster/controlplane.test.ts (a host-process pod's loopback address, which EndpointSlices refuse).
 */
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { get as httpGet } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import type { ControlPlane } from '../support/cluster/controlplane.js';
import { NODE_NAME } from '../support/cluster/controlplane.js';
import { adminClient, namespace, sharedControlPlane, waitForClusterBinaries } from '../support/cluster/shared.js';
import { KubeRequestError, type KubeRestClient } from '../support/k8s/client.js';
import {
  eventually,
  exitCommand,
  httpServerCommand,
  isPodReady,
  mainContainerStatus,
  processAlive,
  sleepCommand,
  stubbornCommand,
} from '../support/k8s/fixtures.js';
import type { LocalKubeletOptions } from '../support/k8s/kubelet.js';
import { LocalKubelet } from '../support/k8s/kubelet.js';
import type { KubeObject } from '../support/k8s/status.js';

/**
 * This suite's images on the control plane's node, which every suite of the process shares: names no other suite
 * maps (a mapping stays for the process's later suites), so not ghcr.io's catalog for the Porch-shaped pod.
 */
const IMAGES = 'fnr.test/kubelet-process';
const FN_IMAGE = `${IMAGES}/fn:v1`;
const INIT_IMAGE = `${IMAGES}/init:v1`;
const WRAPPER_IMAGE = `${IMAGES}/wrapper:v1`;
const ENTRY_IMAGE = `${IMAGES}/entry:v1`;
const CATALOG = `${IMAGES}/krm-functions-catalog/`;

function httpText(url: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = httpGet(url, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (c: string) => (text += c));
      res.on('end', () => resolve(text));
    });
    req.once('error', reject);
  });
}

function podBody(name: string, container: KubeObject, extra: KubeObject = {}, labels: Record<string, string> = {}): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels },
    spec: { containers: [{ name: 'function', image: FN_IMAGE, ...container }], ...extra },
  };
}

/** A fake wrapper-server: listens on --port at $FNR_BIND_ADDRESS and answers with its argv. */
const WRAPPER_SCRIPT = `
const http = require('http');
const args = process.argv.slice(2);
const port = Number(args[args.indexOf('--port') + 1]);
const server = http.createServer((req, res) => res.end(JSON.stringify({ args, pod: process.env.POD_NAME, bind: process.env.FNR_BIND_ADDRESS })));
server.listen(port, process.env.FNR_BIND_ADDRESS);
process.on('SIGTERM', () => process.exit(0));
`;

/** A fake grpc-health-probe: exits 0 when a TCP connection to -addr host:port succeeds. */
const PROBE_SCRIPT = `
const net = require('net');
const args = process.argv.slice(2);
const [host, port] = args[args.indexOf('-addr') + 1].split(':');
const s = net.connect({ host, port: Number(port) }, () => { s.destroy(); process.exit(0); });
s.on('error', () => process.exit(1));
`;

describe('LocalKubelet running pods as host processes on the real control plane', function () {
  this.timeout(60_000);
  waitForClusterBinaries();
  let cp: ControlPlane;
  let ns: { name: string; remove: () => Promise<void> };
  let client: KubeRestClient;
  let scripts: string;
  let PODS: string;

  const find = async (name: string): Promise<KubeObject | undefined> =>
    client.get(`${PODS}/${name}`).catch((e: unknown) => {
      if (e instanceof KubeRequestError && e.code === 404) return undefined;
      throw e;
    });

  /** Polls the pod (undefined once it is gone) until `check` holds; the error shows it otherwise. */
  const waitPod = async (name: string, check: (p: KubeObject | undefined) => boolean, timeoutMs = 30_000): Promise<KubeObject | undefined> => {
    let last: KubeObject | undefined;
    try {
      await eventually(async () => {
        last = await find(name);
        return check(last);
      }, timeoutMs, 50);
      return last;
    } catch (e) {
      throw new Error(`${(e as Error).message}; the pod ${name}: ${JSON.stringify(last)}`, { cause: e });
    }
  };

  /** A second node's kubelet on the control plane (no Node object: its pods name it in spec.nodeName), started. */
  async function startKubelet(options: Omit<LocalKubeletOptions, 'api' | 'nodeName'>): Promise<LocalKubelet> {
    const kubelet = new LocalKubelet({
      api: { url: cp.url, token: cp.adminToken, ca: cp.caPem },
      nodeName: `kubelet-process-${randomBytes(3).toString('hex')}`,
      schedule: false,
      ...options,
    });
    await kubelet.start();
    return kubelet;
  }

  /** Removes pods no kubelet finishes any more (their node's kubelet stopped, or no such node): grace 0. */
  async function forceDelete(names: string[]): Promise<void> {
    for (const name of names) {
      await client.delete(`${PODS}/${name}`, { gracePeriodSeconds: 0 }).catch((e: unknown) => {
        if (!(e instanceof KubeRequestError && e.code === 404)) throw e;
      });
    }
  }

  /** kube-apiserver's open watches of all pods (scope cluster): each kubelet holds one. */
  async function clusterPodWatches(): Promise<number> {
    const text = (await client.raw('GET', '/metrics')).text;
    return text
      .split('\n')
      .filter((l) => l.startsWith('apiserver_longrunning_requests{') && l.includes('resource="pods"') && l.includes('scope="cluster"') && l.includes('verb="WATCH"'))
      .reduce((n, l) => n + Number(l.split(' ').at(-1)), 0);
  }

  before(async function () {
    this.timeout(120_000);
    scripts = await mkdtemp(join(tmpdir(), 'fnr-kubelet-test-'));
    await writeFile(join(scripts, 'wrapper.cjs'), WRAPPER_SCRIPT);
    await writeFile(join(scripts, 'probe.cjs'), PROBE_SCRIPT);
    cp = await sharedControlPlane();
    ns = await namespace(cp, 'kubelet-process');
    PODS = `/api/v1/namespaces/${ns.name}/pods`;
    client = adminClient(cp);
    // The paths the in-process test bed's kubelet rewrote for every image, here for this suite's images only.
    const commandMap = {
      '/wrapper-server-tools/wrapper-server': [process.execPath, join(scripts, 'wrapper.cjs')],
      '/usr/local/bin/function': '/bin/true',
    };
    cp.kubelet!.setImage(FN_IMAGE, { commandMap });
    cp.kubelet!.setImage(INIT_IMAGE, {});
    cp.kubelet!.setImage(WRAPPER_IMAGE, 'skip');
    cp.kubelet!.setImage(`${CATALOG}*`, { commandMap });
    cp.kubelet!.setImage(ENTRY_IMAGE, { command: [process.execPath, '-e'], args: ['setInterval(() => {}, 1000)'] });
  });

  after(async function () {
    await ns?.remove();
    client?.close();
    if (scripts) await rm(scripts, { recursive: true, force: true });
  });

  it('runs a pod: scheduled, Running, Ready with a reachable podIP, env set, gone after delete', async function () {
    await client.create(PODS, podBody('web', { command: httpServerCommand(8080, 'hello'), ports: [{ containerPort: 8080 }] }));
    const ready = (await waitPod('web', isPodReady))!;
    expect(ready.spec.nodeName).to.equal(NODE_NAME);
    expect(ready.status.phase).to.equal('Running');
    expect(ready.status.podIP).to.match(/^127\.\d+\.\d+\.\d+$/);
    expect(ready.status.podIP).to.not.equal('127.0.0.1');
    expect(ready.status.podIPs).to.deep.equal([{ ip: ready.status.podIP }]);
    expect(ready.status.hostIP).to.equal('127.0.0.1');
    const conditions = Object.fromEntries((ready.status.conditions as KubeObject[]).map((c) => [c.type, c.status]));
    expect(conditions).to.include({ PodScheduled: 'True', Initialized: 'True', ContainersReady: 'True', Ready: 'True' });
    const cs = mainContainerStatus(ready)!;
    expect(cs).to.include({ name: 'function', ready: true, started: true, restartCount: 0 });
    expect(cs.state.running.startedAt).to.be.a('string');
    expect(await httpText(`http://${ready.status.podIP}:8080/`)).to.equal('web hello');
    // The node runs every suite's pods: this one's process by its name.
    const pid = cp.kubelet!.podInfos().find((p) => p.namespace === ns.name && p.name === 'web')!.pid!;
    expect(processAlive(pid)).to.equal(true);

    await client.delete(`${PODS}/web`);
    await waitPod('web', (p) => p === undefined);
    await eventually(() => !processAlive(pid));
    await eventually(() => cp.kubelet!.logs(ns.name, 'web') === undefined);
  });

  it('gives each pod its own address and passes POD_* and FNR_BIND_ADDRESS', async function () {
    const envDump = [process.execPath, '-e', "console.log(JSON.stringify({ip: process.env.POD_IP, name: process.env.POD_NAME, ns: process.env.POD_NAMESPACE, bind: process.env.FNR_BIND_ADDRESS, mine: process.env.MINE, ref: process.env.REF})); setInterval(() => {}, 1000)"];
    const env = [
      { name: 'MINE', value: 'ip=$(POD_IP)' },
      { name: 'REF', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
    ];
    await client.create(PODS, podBody('env-a', { command: envDump, env }));
    await client.create(PODS, podBody('env-b', { command: envDump, env }));
    const a = (await waitPod('env-a', isPodReady))!;
    const b = (await waitPod('env-b', isPodReady))!;
    expect(a.status.podIP).to.not.equal(b.status.podIP);
    const waitLog = async (name: string): Promise<KubeObject> => {
      const text = await eventually(() => {
        const t = cp.kubelet!.logs(ns.name, name) ?? '';
        return t.includes('\n') && t;
      });
      return JSON.parse(text.split('\n')[0]!) as KubeObject;
    };
    const out = await waitLog('env-a');
    expect(out).to.deep.equal({ ip: a.status.podIP, name: 'env-a', ns: ns.name, bind: a.status.podIP, mine: `ip=${a.status.podIP}`, ref: 'env-a' });
    await client.delete(`${PODS}/env-a`);
    await client.delete(`${PODS}/env-b`);
    await waitPod('env-a', (p) => p === undefined);
    await waitPod('env-b', (p) => p === undefined);
  });

  it('uses the image entrypoint when the container has no command', async function () {
    await client.create(PODS, { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'entry' }, spec: { containers: [{ name: 'main', image: ENTRY_IMAGE }] } });
    const ready = (await waitPod('entry', isPodReady))!;
    expect(mainContainerStatus(ready)!.name).to.equal('main');
    await client.delete(`${PODS}/entry`);
    await waitPod('entry', (p) => p === undefined);
  });

  it('reports exits by restartPolicy: Never gives Succeeded or Failed', async function () {
    await client.create(PODS, podBody('ok-once', { command: exitCommand(0) }, { restartPolicy: 'Never' }));
    await client.create(PODS, podBody('fail-once', { command: exitCommand(3) }, { restartPolicy: 'Never' }));
    const ok = (await waitPod('ok-once', (p) => p?.status?.phase === 'Succeeded'))!;
    expect(mainContainerStatus(ok)!.state.terminated).to.include({ exitCode: 0, reason: 'Completed' });
    const failed = (await waitPod('fail-once', (p) => p?.status?.phase === 'Failed'))!;
    expect(mainContainerStatus(failed)!.state.terminated).to.include({ exitCode: 3, reason: 'Error' });
    expect(isPodReady(failed)).to.equal(false);
    // Terminal pods are removed at once on delete.
    await client.delete(`${PODS}/ok-once`);
    await client.delete(`${PODS}/fail-once`);
    expect(await find('ok-once')).to.equal(undefined);
  });

  it('restarts crashing containers under Always and OnFailure', async function () {
    await client.create(PODS, podBody('crashy', { command: exitCommand(1) }));
    const crashing = (await waitPod('crashy', (p) => (mainContainerStatus(p)?.restartCount ?? 0) >= 2))!;
    expect(crashing.status.phase).to.equal('Running');
    expect(mainContainerStatus(crashing)!.lastState.terminated).to.include({ exitCode: 1 });
    await client.create(PODS, podBody('onfail-ok', { command: exitCommand(0) }, { restartPolicy: 'OnFailure' }));
    await waitPod('onfail-ok', (p) => p?.status?.phase === 'Succeeded');
    await client.delete(`${PODS}/crashy`);
    await client.delete(`${PODS}/onfail-ok`);
    await waitPod('crashy', (p) => p === undefined);
  });

  it('keeps a pod with an unknown image Pending (ErrImagePull, ImagePullBackOff) until the image is mapped', async function () {
    // On the control plane's node an image it has no mapping for is a real image, run under runc: a host-process
    // kubelet of its own (no container runtime), the pod bound to it.
    const kubelet = await startKubelet({ retryMs: 100 });
    try {
      await client.create(PODS, podBody('no-image', { image: 'registry.example/missing:v9', command: sleepCommand() }, { nodeName: kubelet.nodeName }));
      const pulling = (await waitPod('no-image', (p) => mainContainerStatus(p)?.state?.waiting?.reason === 'ImagePullBackOff'))!;
      expect(pulling.status.phase).to.equal('Pending');
      expect(mainContainerStatus(pulling)!.state.waiting.message).to.contain('registry.example/missing:v9');
      kubelet.setImage('registry.example/missing:v9', {});
      await waitPod('no-image', isPodReady);
      await client.delete(`${PODS}/no-image`);
      await waitPod('no-image', (p) => p === undefined);
    } finally {
      await kubelet.stop();
      await forceDelete(['no-image']);
    }
  });

  it('runs init containers to completion first, and skips images mapped to skip', async function () {
    const writeMarker = [process.execPath, '-e', "require('fs').writeFileSync('init-done', 'yes')"];
    const needMarker = [process.execPath, '-e', "if (!require('fs').existsSync('init-done')) process.exit(7); setInterval(() => {}, 1000)"];
    await client.create(
      PODS,
      podBody('with-init', { command: needMarker }, {
        initContainers: [
          { name: 'copy', image: WRAPPER_IMAGE, command: ['cp', '-a', '/nowhere/.', '/tools'] },
          { name: 'marker', image: INIT_IMAGE, command: writeMarker },
        ],
      }),
    );
    const ready = (await waitPod('with-init', isPodReady))!;
    expect(mainContainerStatus(ready)!.restartCount).to.equal(0);
    expect((ready.status.initContainerStatuses as KubeObject[]).map((s) => [s.name, s.state.terminated?.exitCode])).to.deep.equal([
      ['copy', 0],
      ['marker', 0],
    ]);
    await client.create(
      PODS,
      podBody('bad-init', { command: sleepCommand() }, { restartPolicy: 'Never', initContainers: [{ name: 'boom', image: INIT_IMAGE, command: exitCommand(2) }] }),
    );
    const failed = (await waitPod('bad-init', (p) => p?.status?.phase === 'Failed'))!;
    expect(failed.status.initContainerStatuses[0].state.terminated.exitCode).to.equal(2);
    await client.delete(`${PODS}/with-init`);
    await client.delete(`${PODS}/bad-init`);
    await waitPod('with-init', (p) => p === undefined);
  });

  it('runs a Porch-shaped function pod: commandMap rewrites command and args, the exec probe falls back to its -addr port', async function () {
    await client.create(PODS, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { generateName: 'set-labels-v022-1-584115f2-', labels: { 'fn.kpt.dev/image': 'set-labels-v022-1-584115f2' } },
      spec: {
        initContainers: [
          {
            name: 'copy-wrapper-server',
            image: WRAPPER_IMAGE,
            command: ['cp', '-a', '/home/nonroot/wrapper-server/.', '/wrapper-server-tools'],
            volumeMounts: [{ name: 'wrapper-server-tools', mountPath: '/wrapper-server-tools' }],
          },
        ],
        containers: [
          {
            name: 'function',
            image: `${CATALOG}set-labels:v0.2.2`,
            command: ['/wrapper-server-tools/wrapper-server'],
            args: ['--port', '9446', '--max-request-body-size', '6291456', '--', '/usr/local/bin/function'],
            readinessProbe: { exec: { command: ['/wrapper-server-tools/grpc-health-probe', '-addr', 'localhost:9446'] } },
            volumeMounts: [{ name: 'wrapper-server-tools', mountPath: '/wrapper-server-tools' }],
          },
        ],
        volumes: [{ name: 'wrapper-server-tools', emptyDir: {} }],
      },
    });
    const list = await client.get(PODS, { labelSelector: 'fn.kpt.dev/image=set-labels-v022-1-584115f2' });
    const name = list.items[0].metadata.name as string;
    const ready = (await waitPod(name, isPodReady))!;
    const answer = JSON.parse(await httpText(`http://${ready.status.podIP}:9446/`)) as KubeObject;
    expect(answer).to.deep.equal({
      args: ['--port', '9446', '--max-request-body-size', '6291456', '--', '/bin/true'],
      pod: name,
      bind: ready.status.podIP,
    });
    await client.delete(`${PODS}/${name}`);
    await waitPod(name, (p) => p === undefined);
  });

  it('runs an exec readiness probe that commandMap maps, pointing localhost at the pod address', async function () {
    // Mapped now, for an image of its own: the node's commandMap is every suite's.
    const image = `${IMAGES}/probed:v1`;
    cp.kubelet!.setImage(image, {
      commandMap: {
        '/wrapper-server-tools/wrapper-server': [process.execPath, join(scripts, 'wrapper.cjs')],
        '/probe/grpc-health-probe': [process.execPath, join(scripts, 'probe.cjs')],
      },
    });
    await client.create(
      PODS,
      podBody('exec-probe', {
        image,
        command: ['/wrapper-server-tools/wrapper-server'],
        args: ['--port', '9447'],
        readinessProbe: { exec: { command: ['/probe/grpc-health-probe', '-addr', 'localhost:9447'] } },
      }),
    );
    const ready = (await waitPod('exec-probe', isPodReady))!;
    expect(JSON.parse(await httpText(`http://${ready.status.podIP}:9447/`)).pod).to.equal('exec-probe');
    await client.delete(`${PODS}/exec-probe`);
    await waitPod('exec-probe', (p) => p === undefined);
  });

  it('finishes graceful deletion: SIGTERM first, SIGKILL after the grace period', async function () {
    await client.create(PODS, podBody('stubborn', { command: stubbornCommand() }, { terminationGracePeriodSeconds: 1 }));
    await waitPod('stubborn', isPodReady);
    await eventually(() => (cp.kubelet!.logs(ns.name, 'stubborn') ?? '').includes('started'));
    const pid = cp.kubelet!.podInfos().find((p) => p.namespace === ns.name && p.name === 'stubborn')!.pid!;
    const deletedAt = Date.now();
    const deleting = await client.delete(`${PODS}/stubborn`);
    expect(deleting.metadata.deletionTimestamp).to.be.a('string');
    expect(deleting.metadata.deletionGracePeriodSeconds).to.equal(1);
    const terminating = await client.get(`${PODS}/stubborn`);
    expect(terminating.metadata.deletionTimestamp).to.be.a('string');
    const events: string[] = [];
    const watch = client.watch(PODS, { fieldSelector: 'metadata.name=stubborn', resourceVersion: terminating.metadata.resourceVersion }, (type, o) =>
      events.push(`${type}:${o.status?.phase}`),
    );
    try {
      await waitPod('stubborn', (p) => p === undefined);
      expect(processAlive(pid)).to.equal(false);
      // kube-apiserver never ends a graceful deletion itself: the pod is gone once the node, having killed the
      // process that ignored SIGTERM after the grace period, deleted it with grace 0 (the watch's last event).
      expect(Date.now() - deletedAt).to.be.at.least(1000);
      await eventually(() => events.some((e) => e.startsWith('DELETED:')), 5000);
    } finally {
      watch.stop();
    }
    expect(events.at(-1)).to.match(/^DELETED:(Failed|Succeeded)$/);
  });

  it('waits for a missing ConfigMap (CreateContainerConfigError), then runs with its values', async function () {
    await client.create(
      PODS,
      podBody('needs-cm', {
        command: [process.execPath, '-e', 'console.log("v=" + process.env.FROM_CM + "," + process.env.FROM_SECRET); setInterval(() => {}, 1000)'],
        env: [
          { name: 'FROM_CM', valueFrom: { configMapKeyRef: { name: 'settings', key: 'k' } } },
          { name: 'FROM_SECRET', valueFrom: { secretKeyRef: { name: 'creds', key: 'p', optional: true } } },
        ],
      }),
    );
    await waitPod('needs-cm', (p) => mainContainerStatus(p)?.state?.waiting?.reason === 'CreateContainerConfigError');
    await client.create(`/api/v1/namespaces/${ns.name}/configmaps`, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'settings' }, data: { k: 'hello' } });
    await client.create(`/api/v1/namespaces/${ns.name}/secrets`, { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'creds' }, stringData: { p: 'pw' } });
    await waitPod('needs-cm', isPodReady);
    await eventually(() => (cp.kubelet!.logs(ns.name, 'needs-cm') ?? '').includes('\n'));
    expect(cp.kubelet!.logs(ns.name, 'needs-cm')).to.equal('v=hello,pw\n');
    await client.delete(`${PODS}/needs-cm`);
    await waitPod('needs-cm', (p) => p === undefined);
  });

  it('serves container output through pods/log', async function () {
    await client.create(PODS, podBody('chatty', { command: [process.execPath, '-e', 'console.log("line one"); console.error("line two"); setInterval(() => {}, 1000)'] }));
    await eventually(() => (cp.kubelet!.logs(ns.name, 'chatty') ?? '').includes('line two'));
    // kube-apiserver asks the node's kubelet API (its serving port in the Node's status) for the container's log.
    const res = await client.raw('GET', `${PODS}/chatty/log`);
    expect(res.code).to.equal(200);
    expect(res.text).to.contain('line one\n');
    expect(res.text).to.contain('line two\n');
    await client.delete(`${PODS}/chatty`);
    await waitPod('chatty', (p) => p === undefined);
  });

  describe('scheduling and shutdown, on a kubelet of its own', function () {
    it('leaves pods Pending when scheduling is off, and ignores pods bound to other nodes', async function () {
      const kubelet = await startKubelet({ schedule: false, pullAnyImage: true });
      try {
        // For another scheduler: kube-scheduler leaves it alone, so only a kubelet that schedules would bind it.
        await client.create(PODS, podBody('unscheduled', { command: sleepCommand() }, { schedulerName: 'fnr-no-scheduler' }));
        await client.create(PODS, podBody('elsewhere', { command: sleepCommand() }, { nodeName: `${kubelet.nodeName}-other` }));
        await client.create(PODS, podBody('pinned', { command: sleepCommand() }, { nodeName: kubelet.nodeName }));
        await waitPod('pinned', isPodReady);
        const unscheduled = (await find('unscheduled'))!;
        // The control plane's own node binds pending pods itself only without kube-scheduler (FNR_CLUSTER_SCHEDULER=node).
        if (cp.pids['kube-scheduler']) expect(unscheduled.spec.nodeName).to.equal(undefined);
        else expect(unscheduled.spec.nodeName).to.not.equal(kubelet.nodeName);
        expect((await find('elsewhere'))!.status.phase).to.equal('Pending');
      } finally {
        await forceDelete(['unscheduled', 'elsewhere', 'pinned']);
        await kubelet.stop();
      }
    });

    it('stop() kills every pod process and removes the pod temp dirs and its watch', async function () {
      const kubelet = await startKubelet({ pullAnyImage: true, stopGraceMs: 500 });
      // Names of their own: pods of other test processes have temp dirs in the same tmpdir.
      const prefix = `s${randomBytes(3).toString('hex')}`;
      const names = [1, 2, 3].map((i) => `${prefix}-${i}`);
      try {
        for (const [name, command] of [
          [names[0]!, sleepCommand()],
          [names[1]!, stubbornCommand()],
          [names[2]!, httpServerCommand(8080)],
        ] as const) {
          await client.create(PODS, podBody(name, { command: [...command] }, { nodeName: kubelet.nodeName }));
        }
        for (const name of names) await waitPod(name, isPodReady);
        const pids = kubelet.pids();
        expect(pids).to.have.length(3);
        const podDirsBefore = readdirSync(tmpdir()).filter((d) => d.startsWith(`fnr-pod-${prefix}-`));
        expect(podDirsBefore.length).to.be.at.least(3);
        const watches = await clusterPodWatches();
        await kubelet.stop();
        for (const pid of pids) expect(processAlive(pid), `pid ${pid}`).to.equal(false);
        for (const d of podDirsBefore) expect(existsSync(join(tmpdir(), d)), d).to.equal(false);
        await eventually(async () => (await clusterPodWatches()) < watches, 10_000, 100);
      } finally {
        await kubelet.stop();
        await forceDelete(names);
      }
    });
  });
});
