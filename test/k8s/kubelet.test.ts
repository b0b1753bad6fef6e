import { expect } from 'chai';
import { existsSync, readdirSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { get as httpGet } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { KubeObject, TestBed } from '../support/k8s/index.js';
import { KubeRestClient, startTestBed } from '../support/k8s/index.js';
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

const NS = 'kubelet-test';
const PODS = `/api/v1/namespaces/${NS}/pods`;

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
    spec: { containers: [{ name: 'function', image: 'local/fn:v1', ...container }], ...extra },
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

describe('k8s test bed: local kubelet', function () {
  this.timeout(60_000);
  let bed: TestBed;
  let client: KubeRestClient;
  let scripts: string;

  const waitPod = (name: string, predicate: (p: KubeObject | undefined) => boolean, timeoutMs = 30_000): Promise<KubeObject | undefined> =>
    bed.api.waitFor('pods', NS, name, predicate, timeoutMs);

  before(async function () {
    scripts = await mkdtemp(join(tmpdir(), 'fnr-kubelet-test-'));
    await writeFile(join(scripts, 'wrapper.cjs'), WRAPPER_SCRIPT);
    await writeFile(join(scripts, 'probe.cjs'), PROBE_SCRIPT);
    bed = await startTestBed({
      clientNode: false,
      namespaces: [NS],
      kubelet: {
        imageMap: {
          'local/fn:v1': {},
          'local/init:v1': {},
          'wrapper:v1': 'skip',
          'ghcr.io/kptdev/krm-functions-catalog/*': {},
          'local/entry:v1': { command: [process.execPath, '-e'], args: ['setInterval(() => {}, 1000)'] },
        },
        commandMap: {
          '/wrapper-server-tools/wrapper-server': [process.execPath, join(scripts, 'wrapper.cjs')],
          '/usr/local/bin/function': '/bin/true',
        },
        restartBackoffMs: 50,
        maxRestartBackoffMs: 200,
        retryMs: 100,
      },
    });
    client = new KubeRestClient({ url: bed.url });
  });

  after(async function () {
    client?.close();
    await bed?.stop();
    if (scripts) await rm(scripts, { recursive: true, force: true });
  });

  it('runs a pod: scheduled, Running, Ready with a reachable podIP, env set, gone after delete', async function () {
    await client.create(PODS, podBody('web', { command: httpServerCommand(8080, 'hello'), ports: [{ containerPort: 8080 }] }));
    const ready = (await waitPod('web', isPodReady))!;
    expect(ready.spec.nodeName).to.equal('local-node');
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
    const pid = bed.kubelet!.pids()[0]!;
    expect(processAlive(pid)).to.equal(true);

    await client.delete(`${PODS}/web`);
    await waitPod('web', (p) => p === undefined);
    await eventually(() => !processAlive(pid));
    await eventually(() => bed.kubelet!.logs(NS, 'web') === undefined);
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
        const t = bed.kubelet!.logs(NS, name) ?? '';
        return t.includes('\n') && t;
      });
      return JSON.parse(text.split('\n')[0]!) as KubeObject;
    };
    const out = await waitLog('env-a');
    expect(out).to.deep.equal({ ip: a.status.podIP, name: 'env-a', ns: NS, bind: a.status.podIP, mine: `ip=${a.status.podIP}`, ref: 'env-a' });
    await client.delete(`${PODS}/env-a`);
    await client.delete(`${PODS}/env-b`);
    await waitPod('env-a', (p) => p === undefined);
    await waitPod('env-b', (p) => p === undefined);
  });

  it('uses the image entrypoint when the container has no command', async function () {
    await client.create(PODS, { metadata: { name: 'entry' }, spec: { containers: [{ name: 'main', image: 'local/entry:v1' }] } });
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
    expect(bed.api.registry.find('pods', NS, 'ok-once')).to.equal(undefined);
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
    await client.create(PODS, podBody('no-image', { image: 'registry.example/missing:v9', command: sleepCommand() }));
    const pulling = (await waitPod('no-image', (p) => mainContainerStatus(p)?.state?.waiting?.reason === 'ImagePullBackOff'))!;
    expect(pulling.status.phase).to.equal('Pending');
    expect(mainContainerStatus(pulling)!.state.waiting.message).to.contain('registry.example/missing:v9');
    bed.kubelet!.setImage('registry.example/missing:v9', {});
    await waitPod('no-image', isPodReady);
    await client.delete(`${PODS}/no-image`);
    await waitPod('no-image', (p) => p === undefined);
  });

  it('runs init containers to completion first, and skips images mapped to skip', async function () {
    const writeMarker = [process.execPath, '-e', "require('fs').writeFileSync('init-done', 'yes')"];
    const needMarker = [process.execPath, '-e', "if (!require('fs').existsSync('init-done')) process.exit(7); setInterval(() => {}, 1000)"];
    await client.create(
      PODS,
      podBody('with-init', { command: needMarker }, {
        initContainers: [
          { name: 'copy', image: 'wrapper:v1', command: ['cp', '-a', '/nowhere/.', '/tools'] },
          { name: 'marker', image: 'local/init:v1', command: writeMarker },
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
      podBody('bad-init', { command: sleepCommand() }, { restartPolicy: 'Never', initContainers: [{ name: 'boom', image: 'local/init:v1', command: exitCommand(2) }] }),
    );
    const failed = (await waitPod('bad-init', (p) => p?.status?.phase === 'Failed'))!;
    expect(failed.status.initContainerStatuses[0].state.terminated.exitCode).to.equal(2);
    await client.delete(`${PODS}/with-init`);
    await client.delete(`${PODS}/bad-init`);
    await waitPod('with-init', (p) => p === undefined);
  });

  it('runs a Porch-shaped function pod: commandMap rewrites command and args, the exec probe falls back to its -addr port', async function () {
    await client.create(PODS, {
      metadata: { generateName: 'set-labels-v022-1-584115f2-', labels: { 'fn.kpt.dev/image': 'set-labels-v022-1-584115f2' } },
      spec: {
        initContainers: [
          {
            name: 'copy-wrapper-server',
            image: 'wrapper:v1',
            command: ['cp', '-a', '/home/nonroot/wrapper-server/.', '/wrapper-server-tools'],
            volumeMounts: [{ name: 'wrapper-server-tools', mountPath: '/wrapper-server-tools' }],
          },
        ],
        containers: [
          {
            name: 'function',
            image: 'ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.2.2',
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
    bed.kubelet!.setCommand('/probe/grpc-health-probe', [process.execPath, join(scripts, 'probe.cjs')]);
    await client.create(
      PODS,
      podBody('exec-probe', {
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
    await eventually(() => (bed.kubelet!.logs(NS, 'stubborn') ?? '').includes('started'));
    const pid = bed.kubelet!.podInfos().find((p) => p.name === 'stubborn')!.pid!;
    const deleting = await client.delete(`${PODS}/stubborn`);
    expect(deleting.metadata.deletionTimestamp).to.be.a('string');
    expect(deleting.metadata.deletionGracePeriodSeconds).to.equal(1);
    const terminating = await client.get(`${PODS}/stubborn`);
    expect(terminating.metadata.deletionTimestamp).to.be.a('string');
    const events: string[] = [];
    const watch = client.watch(PODS, { fieldSelector: 'metadata.name=stubborn', resourceVersion: terminating.metadata.resourceVersion }, (type, o) =>
      events.push(`${type}:${o.status?.phase}`),
    );
    await waitPod('stubborn', (p) => p === undefined);
    expect(processAlive(pid)).to.equal(false);
    await new Promise((r) => setTimeout(r, 50));
    watch.stop();
    expect(events.at(-1)).to.match(/^DELETED:(Failed|Succeeded)$/);
    expect(bed.api.requestsFor({ verb: 'delete', resource: 'pods', name: 'stubborn' }).map((r) => r.code)).to.include(200);
  });

  it('maintains Endpoints for Services whose selector matches', async function () {
    await client.create(`/api/v1/namespaces/${NS}/services`, {
      metadata: { name: 'fn-svc', labels: { app: 'fn' } },
      spec: { selector: { app: 'fn' }, ports: [{ name: 'grpc', port: 9446, targetPort: 'grpc' }] },
    });
    const empty = (await bed.api.waitFor('endpoints', NS, 'fn-svc', (e) => e !== undefined))!;
    expect(empty.subsets).to.equal(undefined);
    expect(empty.metadata.labels).to.deep.equal({ app: 'fn' });
    await client.create(PODS, podBody('ep-1', { command: httpServerCommand(9446), ports: [{ name: 'grpc', containerPort: 9446 }] }, {}, { app: 'fn' }));
    const pod = (await waitPod('ep-1', isPodReady))!;
    const ep = (await bed.api.waitFor('endpoints', NS, 'fn-svc', (e) => e?.subsets?.[0]?.addresses?.length === 1))!;
    expect(ep.subsets).to.deep.equal([
      {
        addresses: [{ ip: pod.status.podIP, nodeName: 'local-node', targetRef: { kind: 'Pod', namespace: NS, name: 'ep-1', uid: pod.metadata.uid } }],
        ports: [{ name: 'grpc', port: 9446, protocol: 'TCP' }],
      },
    ]);
    await client.delete(`${PODS}/ep-1`);
    await bed.api.waitFor('endpoints', NS, 'fn-svc', (e) => e !== undefined && e.subsets === undefined);
    await client.delete(`/api/v1/namespaces/${NS}/services/fn-svc`);
    await bed.api.waitFor('endpoints', NS, 'fn-svc', (e) => e === undefined);
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
    await client.create(`/api/v1/namespaces/${NS}/configmaps`, { metadata: { name: 'settings' }, data: { k: 'hello' } });
    await client.create(`/api/v1/namespaces/${NS}/secrets`, { metadata: { name: 'creds' }, stringData: { p: 'pw' } });
    await waitPod('needs-cm', isPodReady);
    await eventually(() => (bed.kubelet!.logs(NS, 'needs-cm') ?? '').includes('\n'));
    expect(bed.kubelet!.logs(NS, 'needs-cm')).to.equal('v=hello,pw\n');
    await client.delete(`${PODS}/needs-cm`);
    await waitPod('needs-cm', (p) => p === undefined);
  });

  it('serves container output through pods/log', async function () {
    await client.create(PODS, podBody('chatty', { command: [process.execPath, '-e', 'console.log("line one"); console.error("line two"); setInterval(() => {}, 1000)'] }));
    await eventually(() => (bed.kubelet!.logs(NS, 'chatty') ?? '').includes('line two'));
    const res = await client.raw('GET', `${PODS}/chatty/log`);
    expect(res.code).to.equal(200);
    expect(res.text).to.contain('line one\n');
    expect(res.text).to.contain('line two\n');
    await client.delete(`${PODS}/chatty`);
    await waitPod('chatty', (p) => p === undefined);
  });
});

describe('k8s test bed: kubelet scheduling and shutdown', function () {
  this.timeout(60_000);

  it('leaves pods Pending when scheduling is off, and ignores pods bound to other nodes', async function () {
    const bed = await startTestBed({ clientNode: false, kubelet: { schedule: false, pullAnyImage: true } });
    try {
      const client = new KubeRestClient({ url: bed.url });
      await client.create('/api/v1/namespaces/default/pods', podBody('unscheduled', { command: sleepCommand() }));
      await client.create('/api/v1/namespaces/default/pods', podBody('elsewhere', { command: sleepCommand() }, { nodeName: 'other-node' }));
      await client.create('/api/v1/namespaces/default/pods', podBody('pinned', { command: sleepCommand() }, { nodeName: 'local-node' }));
      await bed.api.waitFor('pods', 'default', 'pinned', isPodReady);
      expect(bed.api.registry.get('pods', 'default', 'unscheduled').spec.nodeName).to.equal(undefined);
      expect(bed.api.registry.get('pods', 'default', 'elsewhere').status.phase).to.equal('Pending');
      client.close();
    } finally {
      await bed.stop();
    }
  });

  it('stop() kills every pod process and removes pod and test-bed temp dirs', async function () {
    const bed = await startTestBed({ clientNode: false, kubelet: { pullAnyImage: true, stopGraceMs: 500 } });
    const client = new KubeRestClient({ url: bed.url });
    try {
      for (const [name, command] of [
        ['s1', sleepCommand()],
        ['s2', stubbornCommand()],
        ['s3', httpServerCommand(8080)],
      ] as const) {
        await client.create('/api/v1/namespaces/default/pods', podBody(name, { command: [...command] }));
      }
      for (const name of ['s1', 's2', 's3']) await bed.api.waitFor('pods', 'default', name, isPodReady);
    } finally {
      client.close();
    }
    const pids = bed.kubelet!.pids();
    expect(pids).to.have.length(3);
    const podDirsBefore = readdirSync(tmpdir()).filter((d) => /^fnr-pod-s[123]-/.test(d));
    expect(podDirsBefore.length).to.be.at.least(3);
    await bed.stop();
    for (const pid of pids) expect(processAlive(pid), `pid ${pid}`).to.equal(false);
    for (const d of podDirsBefore) expect(existsSync(join(tmpdir(), d)), d).to.equal(false);
    expect(existsSync(bed.dir)).to.equal(false);
    expect(bed.api.activeWatchCount()).to.equal(0);
  });
});
