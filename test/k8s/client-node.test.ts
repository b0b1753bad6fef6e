import { expect } from 'chai';
import * as k8s from '@kubernetes/client-node';
import type { TestBed } from '../support/k8s/index.js';
import { startTestBed } from '../support/k8s/index.js';
import { eventually, httpServerCommand, isPodReady, processAlive } from '../support/k8s/fixtures.js';

const NS = 'cn';

/** Runs a client-node call that must fail; returns the ApiException's code and parsed Status body. */
async function apiError(p: Promise<unknown>): Promise<{ code: number; status: Record<string, any> }> {
  try {
    await p;
  } catch (e) {
    expect(e).to.be.instanceOf(k8s.ApiException);
    const err = e as k8s.ApiException<string>;
    return { code: err.code, status: JSON.parse(err.body) as Record<string, any> };
  }
  throw new Error('expected an ApiException');
}

describe('k8s test bed: fidelity with @kubernetes/client-node 1.x', function () {
  this.timeout(60_000);
  let bed: TestBed;
  let core: k8s.CoreV1Api;

  before(async function () {
    bed = await startTestBed({ namespaces: [NS], kubelet: { imageMap: { 'local/*': {} } } });
    core = bed.kubeConfig.makeApiClient(k8s.CoreV1Api);
  });

  after(async function () {
    await bed?.stop();
  });

  it('creates, reads and lists with selectors; list items carry no kind', async function () {
    const created = await core.createNamespacedConfigMap({ namespace: NS, body: { metadata: { name: 'cm-a', labels: { app: 'fn', tier: 'a' } }, data: { k: 'v' } } });
    expect(created.metadata?.uid).to.be.a('string');
    await core.createNamespacedConfigMap({ namespace: NS, body: { metadata: { name: 'cm-b', labels: { app: 'fn', tier: 'b' } } } });
    await core.createNamespacedConfigMap({ namespace: NS, body: { metadata: { name: 'cm-c', labels: { app: 'other' } } } });
    const read = await core.readNamespacedConfigMap({ name: 'cm-a', namespace: NS });
    expect(read.data).to.deep.equal({ k: 'v' });
    expect(read.kind).to.equal('ConfigMap');
    const list = await core.listNamespacedConfigMap({ namespace: NS, labelSelector: 'app=fn,tier notin (b)' });
    expect(list.items.map((i) => i.metadata?.name)).to.deep.equal(['cm-a']);
    expect(list.items[0]!.kind).to.equal(undefined);
    const byField = await core.listNamespacedConfigMap({ namespace: NS, fieldSelector: 'metadata.name=cm-c' });
    expect(byField.items.map((i) => i.metadata?.name)).to.deep.equal(['cm-c']);
    const paged = await core.listNamespacedConfigMap({ namespace: NS, limit: 2 });
    expect(paged.items).to.have.length(2);
    const rest = await core.listNamespacedConfigMap({ namespace: NS, limit: 2, _continue: paged.metadata?._continue });
    expect(rest.items.map((i) => i.metadata?.name)).to.deep.equal(['cm-c']);
  });

  it('surfaces 404, 409 AlreadyExists, 409 Conflict and 422 as ApiException with a Status body', async function () {
    const notFound = await apiError(core.readNamespacedPod({ name: 'nope', namespace: NS }));
    expect(notFound.code).to.equal(404);
    expect(notFound.status).to.include({ kind: 'Status', reason: 'NotFound', message: 'pods "nope" not found', code: 404 });
    const exists = await apiError(core.createNamespacedConfigMap({ namespace: NS, body: { metadata: { name: 'cm-a' } } }));
    expect(exists.code).to.equal(409);
    expect(exists.status.reason).to.equal('AlreadyExists');
    const current = await core.readNamespacedConfigMap({ name: 'cm-a', namespace: NS });
    await core.replaceNamespacedConfigMap({ name: 'cm-a', namespace: NS, body: { ...current, data: { k: 'v2' } } });
    const stale = await apiError(core.replaceNamespacedConfigMap({ name: 'cm-a', namespace: NS, body: { ...current, data: { k: 'v3' } } }));
    expect(stale.code).to.equal(409);
    expect(stale.status.reason).to.equal('Conflict');
    expect(stale.status.message).to.contain('the object has been modified');
    const invalid = await apiError(core.createNamespacedConfigMap({ namespace: NS, body: { metadata: { name: 'UPPER' } } }));
    expect(invalid.code).to.equal(422);
    expect(invalid.status.reason).to.equal('Invalid');
  });

  it('patches with JSON patch (the default), merge and strategic merge', async function () {
    const json = await core.patchNamespacedConfigMap({ name: 'cm-b', namespace: NS, body: [{ op: 'add', path: '/data', value: { x: '1' } }] });
    expect(json.data).to.deep.equal({ x: '1' });
    const merge = await core.patchNamespacedConfigMap(
      { name: 'cm-b', namespace: NS, body: { metadata: { labels: { tier: null, merged: 'yes' } } } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
    expect(merge.metadata?.labels).to.deep.equal({ app: 'fn', merged: 'yes' });
    const strategic = await core.patchNamespacedConfigMap(
      { name: 'cm-b', namespace: NS, body: { data: { y: '2' } } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.StrategicMergePatch),
    );
    expect(strategic.data).to.deep.equal({ x: '1', y: '2' });
    const ssa = await apiError(
      core.patchNamespacedConfigMap({ name: 'cm-b', namespace: NS, body: {} }, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.ServerSideApply)),
    );
    expect(ssa.code).to.equal(415);
    expect(bed.api.requestsFor({ verb: 'patch', name: 'cm-b' }).map((r) => r.contentType)).to.deep.equal([
      'application/json-patch+json',
      'application/merge-patch+json',
      'application/strategic-merge-patch+json',
      'application/apply-patch+yaml',
    ]);
  });

  it('watches with Watch: ADDED, MODIFIED, DELETED', async function () {
    const events: string[] = [];
    let resolveDeleted!: () => void;
    const deleted = new Promise<void>((r) => (resolveDeleted = r));
    const watch = new k8s.Watch(bed.kubeConfig);
    const controller = await watch.watch(
      `/api/v1/namespaces/${NS}/configmaps`,
      { fieldSelector: 'metadata.name=watched' },
      (type: string, obj: k8s.V1ConfigMap) => {
        events.push(`${type}:${obj.metadata?.name}`);
        if (type === 'DELETED') resolveDeleted();
      },
      () => undefined,
    );
    try {
      await eventually(() => bed.api.activeWatchCount('configmaps') > 0);
      await core.createNamespacedConfigMap({ namespace: NS, body: { metadata: { name: 'watched' } } });
      await core.patchNamespacedConfigMap(
        { name: 'watched', namespace: NS, body: { data: { a: 'b' } } },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
      );
      await core.deleteNamespacedConfigMap({ name: 'watched', namespace: NS });
      await deleted;
    } finally {
      setImmediate(() => controller.abort());
    }
    expect(events).to.deep.equal(['ADDED:watched', 'MODIFIED:watched', 'DELETED:watched']);
  });

  it('runs an informer that survives dropped watches and relists after 410 Expired', async function () {
    const path = `/api/v1/namespaces/${NS}/secrets`;
    const informer = k8s.makeInformer(bed.kubeConfig, path, () => core.listNamespacedSecret({ namespace: NS }));
    const seen: string[] = [];
    informer.on('add', (o) => seen.push(`add:${o.metadata?.name}`));
    informer.on('update', (o) => seen.push(`update:${o.metadata?.name}`));
    informer.on('delete', (o) => seen.push(`delete:${o.metadata?.name}`));
    const errors: unknown[] = [];
    informer.on('error', (e) => errors.push(e));
    await core.createNamespacedSecret({ namespace: NS, body: { metadata: { name: 'before' }, stringData: { a: 'b' } } });
    await informer.start();
    try {
      await eventually(() => seen.includes('add:before'));
      await eventually(() => bed.api.activeWatchCount('secrets') > 0);
      await core.createNamespacedSecret({ namespace: NS, body: { metadata: { name: 'live' } } });
      await eventually(() => seen.includes('add:live'));

      // A dropped connection: the informer watches again from its last resourceVersion.
      const listsBefore = bed.api.requestsFor({ verb: 'list', resource: 'secrets' }).length;
      bed.api.dropWatches({ resource: 'secrets' });
      await eventually(() => bed.api.activeWatchCount('secrets') > 0);
      await core.createNamespacedSecret({ namespace: NS, body: { metadata: { name: 'after-drop' } } });
      await eventually(() => seen.includes('add:after-drop'));
      expect(bed.api.requestsFor({ verb: 'list', resource: 'secrets' }).length).to.equal(listsBefore);

      // History compacted while the watch is down: 410 Expired, then a relist that notices the changes.
      // The re-watch is held back by latency so that the delete and the compaction happen before it is served.
      bed.api.addLatency({ verb: 'watch', resource: 'secrets', ms: 300, times: 1 });
      bed.api.dropWatches({ resource: 'secrets' });
      await core.deleteNamespacedSecret({ name: 'live', namespace: NS });
      bed.api.compact();
      await eventually(() => seen.includes('delete:live'));
      const expiredWatches = bed.api.requestsFor({ verb: 'watch', resource: 'secrets' });
      expect(expiredWatches.length).to.be.at.least(3);
      expect(bed.api.requestsFor({ verb: 'list', resource: 'secrets' }).length).to.be.greaterThan(listsBefore);
      expect(informer.list(NS).map((s) => s.metadata?.name).sort()).to.deep.equal(['after-drop', 'before']);
      expect(errors).to.deep.equal([]);
    } finally {
      await informer.stop();
    }
  });

  it('works with leases through CoordinationV1Api', async function () {
    const coordination = bed.kubeConfig.makeApiClient(k8s.CoordinationV1Api);
    const lease = await coordination.createNamespacedLease({
      namespace: NS,
      body: { metadata: { name: 'fnr' }, spec: { holderIdentity: 'a', leaseDurationSeconds: 10, renewTime: new k8s.V1MicroTime() } },
    });
    expect(lease.spec?.holderIdentity).to.equal('a');
    expect(lease.spec?.renewTime).to.match(/^\d{4}-\d\d-\d\dT[\d:.]+Z$/);
    const renewed = await coordination.replaceNamespacedLease({ name: 'fnr', namespace: NS, body: { ...lease, spec: { ...lease.spec, holderIdentity: 'b' } } });
    expect(renewed.spec?.holderIdentity).to.equal('b');
    const conflict = await apiError(coordination.replaceNamespacedLease({ name: 'fnr', namespace: NS, body: { ...lease, spec: { ...lease.spec, holderIdentity: 'c' } } }));
    expect(conflict.code).to.equal(409);
  });

  it('runs a pod created through client-node: Ready, reachable on its podIP, cleaned up on delete', async function () {
    const created = await core.createNamespacedPod({
      namespace: NS,
      body: {
        metadata: { generateName: 'trivial-' },
        spec: { containers: [{ name: 'function', image: 'local/trivial:v1', command: httpServerCommand(9446, 'pong'), ports: [{ containerPort: 9446 }] }] },
      },
    });
    const name = created.metadata!.name!;
    expect(name).to.match(/^trivial-[a-z0-9]{5}$/);
    const ready = (await bed.api.waitFor('pods', NS, name, isPodReady, 30_000))!;
    const pod = await core.readNamespacedPod({ name, namespace: NS });
    expect(pod.status?.phase).to.equal('Running');
    expect(pod.status?.podIP).to.equal(ready.status.podIP);
    const answer = await fetch(`http://${pod.status!.podIP}:9446/`);
    expect(await answer.text()).to.equal(`${name} pong`);
    const pid = bed.kubelet!.podInfos().find((p) => p.name === name)!.pid!;
    expect(processAlive(pid)).to.equal(true);

    const deleting = await core.deleteNamespacedPod({ name, namespace: NS });
    expect(deleting.metadata?.deletionTimestamp).to.be.instanceOf(Date);
    await bed.api.waitFor('pods', NS, name, (p) => p === undefined, 30_000);
    await eventually(() => !processAlive(pid));
    const gone = await apiError(core.readNamespacedPod({ name, namespace: NS }));
    expect(gone.code).to.equal(404);
    await eventually(() => bed.kubelet!.podInfos().every((p) => p.name !== name));
  });
});

describe('k8s test bed: client-node over HTTPS with a bearer token', function () {
  this.timeout(30_000);
  let bed: TestBed;

  before(async function () {
    bed = await startTestBed({ server: { tls: true, token: 't0ken' }, kubelet: false });
  });

  after(async function () {
    await bed?.stop();
  });

  it('connects with the kubeconfig (CA data and token)', async function () {
    const core = bed.kubeConfig.makeApiClient(k8s.CoreV1Api);
    const namespaces = await core.listNamespace();
    expect(namespaces.items.map((n) => n.metadata?.name)).to.include('default');
    const wrong = new k8s.KubeConfig();
    wrong.loadFromOptions({
      clusters: [{ name: 'c', server: bed.url, caData: Buffer.from(bed.api.caPem!).toString('base64') }],
      users: [{ name: 'u', token: 'wrong' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    // client-node does not parse the body of a 401 (its generated code only does for 200), so look at the code.
    const failed = await wrong
      .makeApiClient(k8s.CoreV1Api)
      .listNamespace()
      .then(
        () => undefined,
        (e: unknown) => e as k8s.ApiException<unknown>,
      );
    expect(failed).to.be.instanceOf(k8s.ApiException);
    expect(failed!.code).to.equal(401);
  });
});
