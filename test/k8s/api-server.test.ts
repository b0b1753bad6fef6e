import { expect } from 'chai';
import { get as httpGet } from 'node:http';
import type { KubeObject } from '../support/k8s/index.js';
import { KubeRequestError, KubeRestClient, TestApiServer } from '../support/k8s/index.js';

const PODS = '/api/v1/namespaces/default/pods';
const CMS = '/api/v1/namespaces/default/configmaps';

function pod(name: string, labels: Record<string, string> = {}, extra: KubeObject = {}): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels },
    spec: { containers: [{ name: 'function', image: 'example.com/fn:v1' }] },
    ...extra,
  };
}

async function expectStatus(p: Promise<unknown>, code: number, reason?: string): Promise<KubeObject> {
  try {
    await p;
  } catch (e) {
    expect(e).to.be.instanceOf(KubeRequestError);
    const err = e as KubeRequestError;
    expect(err.code, JSON.stringify(err.status)).to.equal(code);
    if (reason) expect(err.status?.reason).to.equal(reason);
    return err.status!;
  }
  throw new Error(`expected HTTP ${code}`);
}

/** Collects watch events until `until` holds for them. */
function collect(client: KubeRestClient, path: string, query: Record<string, string | boolean | number | undefined>, until: (events: KubeObject[]) => boolean, timeoutMs = 10_000): Promise<KubeObject[]> {
  return new Promise((resolve, reject) => {
    const events: KubeObject[] = [];
    const handle = client.watch(path, query, (type, object) => {
      events.push({ type, object });
      if (until(events)) {
        clearTimeout(timer);
        handle.stop();
        resolve(events);
      }
    });
    const timer = setTimeout(() => {
      handle.stop();
      reject(new Error(`watch events so far: ${JSON.stringify(events.map((e) => [e.type, e.object?.metadata?.name]))}`));
    }, timeoutMs);
    void handle.done.then((err) => {
      if (!until(events)) {
        clearTimeout(timer);
        if (err) reject(err);
        else resolve(events);
      }
    });
  });
}

describe('k8s test bed: API server semantics', function () {
  let api: TestApiServer;
  let client: KubeRestClient;

  before(async function () {
    api = await TestApiServer.start({ bookmarkIntervalMs: 100 });
    client = new KubeRestClient({ url: api.url });
  });

  after(async function () {
    client?.close();
    await api?.stop();
  });

  describe('discovery', function () {
    it('serves /version, /api, /api/v1, /apis and the coordination group', async function () {
      expect((await client.get('/version')).major).to.equal('1');
      expect((await client.get('/api')).versions).to.deep.equal(['v1']);
      const v1 = await client.get('/api/v1');
      const names = (v1.resources as KubeObject[]).map((r) => r.name);
      expect(names).to.include.members(['pods', 'pods/status', 'pods/binding', 'services', 'endpoints', 'configmaps', 'secrets', 'namespaces']);
      const podsEntry = (v1.resources as KubeObject[]).find((r) => r.name === 'pods')!;
      expect(podsEntry).to.include({ kind: 'Pod', namespaced: true, singularName: 'pod' });
      expect(podsEntry.verbs).to.include.members(['watch', 'patch', 'deletecollection']);
      const apis = await client.get('/apis');
      expect((apis.groups as KubeObject[]).map((g) => g.name)).to.include('coordination.k8s.io');
      const coord = await client.get('/apis/coordination.k8s.io/v1');
      expect((coord.resources as KubeObject[]).map((r) => r.name)).to.include('leases');
    });

    it('answers unknown resources with a 404 Status', async function () {
      const status = await expectStatus(client.get('/api/v1/namespaces/default/widgets'), 404, 'NotFound');
      expect(status.message).to.equal('the server could not find the requested resource');
    });
  });

  describe('create', function () {
    it('sets uid, creationTimestamp, a global resourceVersion, and pod defaults', async function () {
      const before = Number(api.registry.resourceVersion);
      const created = await client.create(PODS, pod('defaults'));
      expect(created.metadata.uid).to.match(/^[0-9a-f-]{36}$/);
      expect(created.metadata.creationTimestamp).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
      expect(Number(created.metadata.resourceVersion)).to.equal(before + 1);
      expect(created.spec).to.include({ restartPolicy: 'Always', terminationGracePeriodSeconds: 30, dnsPolicy: 'ClusterFirst' });
      expect(created.spec.containers[0]).to.include({ imagePullPolicy: 'IfNotPresent', terminationMessagePath: '/dev/termination-log' });
      expect(created.status).to.deep.equal({ phase: 'Pending', qosClass: 'BestEffort' });
      const cm = await client.create(CMS, { metadata: { name: 'rv-check' }, data: { a: 'b' } });
      expect(Number(cm.metadata.resourceVersion)).to.equal(before + 2);
    });

    it('generates names from generateName', async function () {
      const a = await client.create(PODS, pod('', {}, { metadata: { generateName: 'gen-' } }));
      const b = await client.create(PODS, pod('', {}, { metadata: { generateName: 'gen-' } }));
      expect(a.metadata.name).to.match(/^gen-[a-z0-9]{5}$/);
      expect(a.metadata.name).to.not.equal(b.metadata.name);
      expect(a.metadata.generateName).to.equal('gen-');
    });

    it('defaults services and folds secret stringData', async function () {
      const svc = await client.create('/api/v1/namespaces/default/services', {
        metadata: { name: 'svc-defaults' },
        spec: { selector: { app: 'x' }, ports: [{ port: 9446 }] },
      });
      expect(svc.spec.type).to.equal('ClusterIP');
      expect(svc.spec.clusterIP).to.match(/^10\.96\./);
      expect(svc.spec.clusterIPs).to.deep.equal([svc.spec.clusterIP]);
      expect(svc.spec.ports[0]).to.deep.equal({ port: 9446, protocol: 'TCP', targetPort: 9446 });
      const secret = await client.create('/api/v1/namespaces/default/secrets', { metadata: { name: 's1' }, stringData: { user: 'me' } });
      expect(secret.type).to.equal('Opaque');
      expect(secret.data).to.deep.equal({ user: Buffer.from('me').toString('base64') });
      expect(secret.stringData).to.equal(undefined);
    });

    it('answers 409 AlreadyExists, 404 for a missing namespace, and dryRun does not persist', async function () {
      await client.create(CMS, { metadata: { name: 'dup' } });
      const status = await expectStatus(client.create(CMS, { metadata: { name: 'dup' } }), 409, 'AlreadyExists');
      expect(status).to.deep.equal({
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message: 'configmaps "dup" already exists',
        reason: 'AlreadyExists',
        details: { name: 'dup', kind: 'configmaps' },
        code: 409,
      });
      const missing = await expectStatus(client.create('/api/v1/namespaces/nope/configmaps', { metadata: { name: 'x' } }), 404, 'NotFound');
      expect(missing.message).to.equal('namespaces "nope" not found');
      const dry = await client.request('POST', CMS, { body: { metadata: { name: 'dry' } }, query: { dryRun: 'All' } });
      expect(dry.metadata.name).to.equal('dry');
      await expectStatus(client.get(`${CMS}/dry`), 404);
    });

    it('validates names (DNS-1123 / DNS-1035) and labels with 422 Invalid', async function () {
      const bad = await expectStatus(client.create(CMS, { metadata: { name: 'Bad_Name' } }), 422, 'Invalid');
      expect(bad.message).to.match(/^ConfigMap "Bad_Name" is invalid: metadata\.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain/);
      expect(bad.details).to.include({ name: 'Bad_Name', kind: 'ConfigMap' });
      expect(bad.details.causes[0]).to.include({ reason: 'FieldValueInvalid', field: 'metadata.name' });
      const svc = await expectStatus(client.create('/api/v1/namespaces/default/services', { metadata: { name: '1svc' }, spec: { ports: [{ port: 80 }] } }), 422);
      expect(svc.message).to.contain('a DNS-1035 label must consist of lower case alphanumeric characters');
      const ns = await expectStatus(client.create('/api/v1/namespaces', { metadata: { name: 'a.b' } }), 422);
      expect(ns.message).to.contain('RFC 1123 label');
      const label = await expectStatus(client.create(CMS, { metadata: { name: 'long-label', labels: { 'fn.kpt.dev/image': 'x'.repeat(64) } } }), 422);
      expect(label.message).to.contain('must be no more than 63 characters');
      const noName = await expectStatus(client.create(CMS, { metadata: {} }), 422);
      expect(noName.message).to.contain('name or generateName is required');
      const noContainers = await expectStatus(client.create(PODS, { metadata: { name: 'empty' }, spec: { containers: [] } }), 422);
      expect(noContainers.message).to.equal('Pod "empty" is invalid: spec.containers: Required value');
    });

    it('answers 415 for protobuf bodies and 400 for bad JSON', async function () {
      await expectStatus(client.request('POST', CMS, { body: 'x', contentType: 'application/vnd.kubernetes.protobuf' }), 415, 'UnsupportedMediaType');
      await expectStatus(client.request('POST', CMS, { body: '{nope', contentType: 'application/json' }), 400, 'BadRequest');
    });
  });

  describe('get, update and 404/409', function () {
    it('returns the exact NotFound Status', async function () {
      const status = await expectStatus(client.get(`${PODS}/nope`), 404);
      expect(status).to.deep.equal({
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message: 'pods "nope" not found',
        reason: 'NotFound',
        details: { name: 'nope', kind: 'pods' },
        code: 404,
      });
    });

    it('rejects a PUT with a stale resourceVersion with 409 Conflict', async function () {
      const cm = await client.create(CMS, { metadata: { name: 'put-me' }, data: { v: '1' } });
      const updated = await client.replace(`${CMS}/put-me`, { ...cm, data: { v: '2' } });
      expect(Number(updated.metadata.resourceVersion)).to.be.greaterThan(Number(cm.metadata.resourceVersion));
      const status = await expectStatus(client.replace(`${CMS}/put-me`, { ...cm, data: { v: '3' } }), 409, 'Conflict');
      expect(status.message).to.equal(
        'Operation cannot be fulfilled on configmaps "put-me": the object has been modified; please apply your changes to the latest version and try again',
      );
    });

    it('keeps status out of main-resource writes and spec out of /status writes', async function () {
      const p = await client.create(PODS, pod('status-split'));
      const withStatus = await client.replace(`${PODS}/status-split`, { ...p, metadata: { ...p.metadata, labels: { a: 'b' } }, status: { phase: 'Running' } });
      expect(withStatus.status.phase).to.equal('Pending');
      expect(withStatus.metadata.labels).to.deep.equal({ a: 'b' });
      const viaStatus = await client.patch(`${PODS}/status-split/status`, { status: { phase: 'Running' }, metadata: { labels: { c: 'd' } } }, 'merge');
      expect(viaStatus.status.phase).to.equal('Running');
      expect(viaStatus.metadata.labels).to.deep.equal({ a: 'b' });
    });

    it('keeps pod spec immutable except images (422)', async function () {
      await client.create(PODS, pod('immutable'));
      const status = await expectStatus(client.patch(`${PODS}/immutable`, { spec: { restartPolicy: 'Never' } }, 'merge'), 422, 'Invalid');
      expect(status.message).to.match(/^Pod "immutable" is invalid: spec: Forbidden: pod updates may not change fields other than/);
      const ok = await client.patch(`${PODS}/immutable`, { spec: { containers: [{ name: 'function', image: 'example.com/fn:v2' }] } }, 'strategic');
      expect(ok.spec.containers[0].image).to.equal('example.com/fn:v2');
    });
  });

  describe('patch', function () {
    it('applies merge, strategic and JSON patches', async function () {
      await client.create(PODS, pod('patch-me', { app: 'fn' }, {
        spec: {
          containers: [
            { name: 'function', image: 'a:1', env: [{ name: 'A', value: '1' }, { name: 'B', value: '2' }] },
            { name: 'sidecar', image: 'b:1' },
          ],
        },
      }));
      const merged = await client.patch(`${PODS}/patch-me`, { metadata: { labels: { extra: 'yes', app: null } } }, 'merge');
      expect(merged.metadata.labels).to.deep.equal({ extra: 'yes' });
      const strategic = await client.patch(
        `${PODS}/patch-me`,
        { spec: { containers: [{ name: 'function', image: 'a:2' }] }, metadata: { finalizers: ['example.com/x'] } },
        'strategic',
      );
      expect(strategic.spec.containers.map((c: KubeObject) => `${c.name}=${c.image}`)).to.deep.equal(['function=a:2', 'sidecar=b:1']);
      expect(strategic.spec.containers[0].env).to.deep.equal([{ name: 'A', value: '1' }, { name: 'B', value: '2' }]);
      const conditions = await client.patch(
        `${PODS}/patch-me/status`,
        { status: { conditions: [{ type: 'Ready', status: 'False' }, { type: 'PodScheduled', status: 'True' }] } },
        'strategic',
      );
      expect(conditions.status.conditions).to.have.length(2);
      const merged2 = await client.patch(
        `${PODS}/patch-me/status`,
        { status: { conditions: [{ type: 'Ready', status: 'True' }, { type: 'PodScheduled', $patch: 'delete' }] } },
        'strategic',
      );
      expect(merged2.status.conditions).to.deep.equal([{ type: 'Ready', status: 'True' }]);
      const json = await client.patch(`${PODS}/patch-me`, [
        { op: 'test', path: '/metadata/labels/extra', value: 'yes' },
        { op: 'add', path: '/metadata/annotations', value: { note: 'x' } },
        { op: 'remove', path: '/metadata/finalizers' },
      ], 'json');
      expect(json.metadata.annotations).to.deep.equal({ note: 'x' });
      expect(json.metadata.finalizers).to.equal(undefined);
      await expectStatus(client.patch(`${PODS}/patch-me`, [{ op: 'test', path: '/metadata/labels/extra', value: 'no' }], 'json'), 422);
      await expectStatus(client.patch(`${PODS}/patch-me`, { not: 'an array' }, 'json'), 400);
    });

    it('answers 415 for server-side apply and unknown patch types', async function () {
      await client.create(CMS, { metadata: { name: 'ssa' } });
      await expectStatus(client.request('PATCH', `${CMS}/ssa`, { body: '{}', contentType: 'application/apply-patch+yaml' }), 415, 'UnsupportedMediaType');
      await expectStatus(client.request('PATCH', `${CMS}/ssa`, { body: '{}', contentType: 'application/json' }), 415);
    });

    it('does not bump the resourceVersion for a no-op patch, and honours a resourceVersion precondition', async function () {
      const cm = await client.create(CMS, { metadata: { name: 'noop', labels: { a: 'b' } } });
      const same = await client.patch(`${CMS}/noop`, { metadata: { labels: { a: 'b' } } }, 'merge');
      expect(same.metadata.resourceVersion).to.equal(cm.metadata.resourceVersion);
      const changed = await client.patch(`${CMS}/noop`, { metadata: { labels: { a: 'c' } } }, 'merge');
      expect(changed.metadata.resourceVersion).to.not.equal(cm.metadata.resourceVersion);
      await expectStatus(client.patch(`${CMS}/noop`, { metadata: { resourceVersion: cm.metadata.resourceVersion, labels: { a: 'd' } } }, 'merge'), 409, 'Conflict');
      await expectStatus(client.patch(`${CMS}/missing`, { data: {} }, 'merge'), 404);
    });
  });

  describe('list', function () {
    before(async function () {
      await client.create('/api/v1/namespaces', { metadata: { name: 'sel' } });
      const p = (name: string, labels: Record<string, string>) => client.create('/api/v1/namespaces/sel/pods', pod(name, labels));
      await p('a', { app: 'fn', tier: 'x' });
      await p('b', { app: 'fn', tier: 'y' });
      await p('c', { app: 'other' });
      await p('d', {});
      await client.patch('/api/v1/namespaces/sel/pods/b/status', { status: { phase: 'Running' } }, 'merge');
    });

    const names = async (query: Record<string, string>): Promise<string[]> =>
      ((await client.get('/api/v1/namespaces/sel/pods', query)).items as KubeObject[]).map((i) => i.metadata.name);

    it('filters by label selectors', async function () {
      expect(await names({ labelSelector: 'app=fn' })).to.deep.equal(['a', 'b']);
      expect(await names({ labelSelector: 'app==fn,tier=y' })).to.deep.equal(['b']);
      expect(await names({ labelSelector: 'app!=fn' })).to.deep.equal(['c', 'd']);
      expect(await names({ labelSelector: 'tier in (x, z)' })).to.deep.equal(['a']);
      expect(await names({ labelSelector: 'app notin (fn)' })).to.deep.equal(['c', 'd']);
      expect(await names({ labelSelector: 'tier' })).to.deep.equal(['a', 'b']);
      expect(await names({ labelSelector: '!app' })).to.deep.equal(['d']);
      await expectStatus(client.get('/api/v1/namespaces/sel/pods', { labelSelector: 'app in (' }), 400, 'BadRequest');
    });

    it('filters by field selectors', async function () {
      expect(await names({ fieldSelector: 'metadata.name=c' })).to.deep.equal(['c']);
      expect(await names({ fieldSelector: 'status.phase=Running' })).to.deep.equal(['b']);
      expect(await names({ fieldSelector: 'status.phase!=Running,metadata.name!=a' })).to.deep.equal(['c', 'd']);
      const status = await expectStatus(client.get('/api/v1/namespaces/sel/pods', { fieldSelector: 'spec.bogus=1' }), 400);
      expect(status.message).to.equal('field label not supported: spec.bogus');
    });

    it('pages with limit and continue, and items carry no kind/apiVersion', async function () {
      const first = await client.get('/api/v1/namespaces/sel/pods', { limit: 3 });
      expect(first.kind).to.equal('PodList');
      expect(first.metadata.resourceVersion).to.be.a('string');
      expect((first.items as KubeObject[]).map((i) => i.metadata.name)).to.deep.equal(['a', 'b', 'c']);
      expect(first.items[0].kind).to.equal(undefined);
      expect(first.items[0].apiVersion).to.equal(undefined);
      expect(first.metadata.continue).to.be.a('string');
      expect(first.metadata.remainingItemCount).to.equal(1);
      const second = await client.get('/api/v1/namespaces/sel/pods', { limit: 3, continue: first.metadata.continue });
      expect((second.items as KubeObject[]).map((i) => i.metadata.name)).to.deep.equal(['d']);
      expect(second.metadata.continue).to.equal(undefined);
      const all = await client.get('/api/v1/pods', { labelSelector: 'app=fn' });
      expect((all.items as KubeObject[]).map((i) => `${i.metadata.namespace}/${i.metadata.name}`)).to.deep.equal(['sel/a', 'sel/b']);
    });

    it('serves meta.k8s.io Table output when asked', async function () {
      const table = await client.request('GET', '/api/v1/namespaces/sel/pods', { accept: 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json' });
      expect(table.kind).to.equal('Table');
      expect((table.columnDefinitions as KubeObject[]).map((c) => c.name).slice(0, 5)).to.deep.equal(['Name', 'Ready', 'Status', 'Restarts', 'Age']);
      expect(table.rows[1].cells.slice(0, 3)).to.deep.equal(['b', '0/1', 'Running']);
      expect(table.rows[0].object.kind).to.equal('PartialObjectMetadata');
    });
  });

  describe('delete', function () {
    it('returns a Success Status for configmaps and the object for pods', async function () {
      const cm = await client.create(CMS, { metadata: { name: 'del-cm' } });
      const status = await client.delete(`${CMS}/del-cm`);
      expect(status).to.deep.equal({ kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details: { name: 'del-cm', kind: 'configmaps', uid: cm.metadata.uid } });
      await client.create(PODS, pod('del-unscheduled'));
      const deleted = await client.delete(`${PODS}/del-unscheduled`);
      expect(deleted.kind).to.equal('Pod');
      await expectStatus(client.get(`${PODS}/del-unscheduled`), 404);
    });

    it('deletes a scheduled pod gracefully: deletionTimestamp first, gone after a grace-0 delete', async function () {
      await client.create(PODS, pod('graceful', {}, { spec: { nodeName: 'n1', terminationGracePeriodSeconds: 20, containers: [{ name: 'c', image: 'i:1' }] } }));
      const first = await client.delete(`${PODS}/graceful`);
      expect(first.metadata.deletionTimestamp).to.be.a('string');
      expect(first.metadata.deletionGracePeriodSeconds).to.equal(20);
      const listed = await client.get(PODS, { fieldSelector: 'metadata.name=graceful' });
      expect(listed.items).to.have.length(1);
      const shorter = await client.delete(`${PODS}/graceful`, { gracePeriodSeconds: 5 });
      expect(shorter.metadata.deletionGracePeriodSeconds).to.equal(5);
      await client.delete(`${PODS}/graceful`, { gracePeriodSeconds: 0 });
      await expectStatus(client.get(`${PODS}/graceful`), 404);
    });

    it('waits for finalizers and checks preconditions', async function () {
      const cm = await client.create(CMS, { metadata: { name: 'final', finalizers: ['example.com/hold'] } });
      await expectStatus(client.delete(`${CMS}/final`, { preconditions: { uid: 'other' } }), 409, 'Conflict');
      const pending = await client.delete(`${CMS}/final`, { preconditions: { uid: cm.metadata.uid } });
      expect(pending.metadata.deletionTimestamp).to.be.a('string');
      expect((await client.get(`${CMS}/final`)).metadata.deletionTimestamp).to.be.a('string');
      await expectStatus(client.patch(`${CMS}/final`, { metadata: { finalizers: ['example.com/hold', 'example.com/new'] } }, 'merge'), 422);
      await client.patch(`${CMS}/final`, { metadata: { finalizers: null } }, 'merge');
      await expectStatus(client.get(`${CMS}/final`), 404);
    });

    it('deletes collections by selector and namespaces with their contents', async function () {
      await client.create('/api/v1/namespaces', { metadata: { name: 'doomed' } });
      for (const n of ['x1', 'x2', 'y1']) await client.create('/api/v1/namespaces/doomed/configmaps', { metadata: { name: n, labels: { group: n[0]! } } });
      await client.create('/api/v1/namespaces/doomed/configmaps', { metadata: { name: 'held', finalizers: ['example.com/hold'] } });
      const removed = await client.request('DELETE', '/api/v1/namespaces/doomed/configmaps', { query: { labelSelector: 'group=x' } });
      expect(removed.kind).to.equal('ConfigMapList');
      expect((removed.items as KubeObject[]).map((i) => i.metadata.name)).to.deep.equal(['x1', 'x2']);
      const ns = await client.delete('/api/v1/namespaces/doomed');
      expect(ns.status.phase).to.equal('Terminating');
      const forbidden = await expectStatus(client.create('/api/v1/namespaces/doomed/configmaps', { metadata: { name: 'late' } }), 403, 'Forbidden');
      expect(forbidden.message).to.equal('configmaps "late" is forbidden: unable to create new content in namespace doomed because it is being terminated');
      await api.waitFor('configmaps', 'doomed', 'held', (o) => !!o?.metadata.deletionTimestamp);
      expect(api.registry.find('namespaces', undefined, 'doomed')?.status.phase).to.equal('Terminating');
      await client.patch('/api/v1/namespaces/doomed/configmaps/held', { metadata: { finalizers: null } }, 'merge');
      await api.waitFor('namespaces', undefined, 'doomed', (o) => o === undefined);
      expect(api.registry.find('configmaps', 'doomed', 'y1')).to.equal(undefined);
    });
  });

  describe('watch', function () {
    before(async function () {
      await client.create('/api/v1/namespaces', { metadata: { name: 'w' } });
    });
    const W = '/api/v1/namespaces/w/configmaps';

    it('flushes headers at once and sends ADDED for existing objects without a resourceVersion', async function () {
      await client.create(W, { metadata: { name: 'pre', labels: { w: 'yes' } } });
      // The response headers must arrive before any event: a watch on a selector that matches nothing has none.
      const res = await new Promise<{ code: number; type: string | undefined }>((resolve, reject) => {
        const req = httpGet(`${api.url}${W}?watch=true&labelSelector=nothing%3Dhere`, (r) => {
          resolve({ code: r.statusCode ?? 0, type: r.headers['content-type'] });
          req.destroy();
        });
        req.once('error', reject);
      });
      expect(res.code).to.equal(200);
      expect(res.type).to.equal('application/json');
      const events = await collect(client, W, { labelSelector: 'w=yes' }, (ev) => ev.length >= 1);
      expect(events[0]!.type).to.equal('ADDED');
      expect(events[0]!.object.metadata.name).to.equal('pre');
      expect(events[0]!.object.kind).to.equal('ConfigMap');
    });

    it('replays from a resourceVersion and turns selector transitions into ADDED/DELETED', async function () {
      const start = api.registry.resourceVersion;
      await client.create(W, { metadata: { name: 'moving' } });
      await client.patch(`${W}/moving`, { metadata: { labels: { gc: 'yes' } } }, 'merge');
      await client.patch(`${W}/moving`, { metadata: { labels: { other: '1' } } }, 'merge');
      await client.patch(`${W}/moving`, { metadata: { labels: { gc: null } } }, 'merge');
      const events = await collect(client, W, { resourceVersion: start, labelSelector: 'gc=yes' }, (ev) => ev.length >= 3);
      expect(events.map((e) => [e.type, e.object.metadata.labels])).to.deep.equal([
        ['ADDED', { gc: 'yes' }],
        ['MODIFIED', { gc: 'yes', other: '1' }],
        ['DELETED', { other: '1' }],
      ]);
    });

    it('sends 410 Expired for a resourceVersion older than the history, then closes', async function () {
      const old = api.registry.resourceVersion;
      await client.create(W, { metadata: { name: 'after-old' } });
      api.compact();
      const events = await collect(client, W, { resourceVersion: old }, () => false);
      expect(events).to.have.length(1);
      expect(events[0]!.type).to.equal('ERROR');
      expect(events[0]!.object).to.include({ kind: 'Status', code: 410, reason: 'Expired' });
      expect(events[0]!.object.message).to.match(/^too old resource version: \d+ \(\d+\)$/);
    });

    it('sends bookmarks and honours timeoutSeconds', async function () {
      const events = await collect(client, W, { resourceVersion: api.registry.resourceVersion, allowWatchBookmarks: true, timeoutSeconds: 1 }, () => false);
      const bookmarks = events.filter((e) => e.type === 'BOOKMARK');
      expect(bookmarks.length).to.be.greaterThan(0);
      expect(bookmarks[0]!.object.metadata.resourceVersion).to.be.a('string');
      expect(bookmarks[0]!.object.kind).to.equal('ConfigMap');
    });

    it('watches a single object by field selector, including its deletion', async function () {
      await client.create(W, { metadata: { name: 'one' } });
      await client.create(W, { metadata: { name: 'two' } });
      const watching = collect(client, W, { fieldSelector: 'metadata.name=one' }, (ev) => ev.some((e) => e.type === 'DELETED'));
      await new Promise((r) => setTimeout(r, 50));
      await client.patch(`${W}/two`, { data: { x: 'y' } }, 'merge');
      await client.patch(`${W}/one`, { data: { x: 'y' } }, 'merge');
      await client.delete(`${W}/one`);
      const events = await watching;
      expect(events.map((e) => `${e.type}:${e.object.metadata.name}`)).to.deep.equal(['ADDED:one', 'MODIFIED:one', 'DELETED:one']);
    });
  });

  describe('fault injection', function () {
    it('fails the next N calls of a verb/resource with a status code', async function () {
      await client.create(CMS, { metadata: { name: 'faulty' } });
      const handle = api.failNext({ verb: 'get', resource: 'configmaps', code: 503, times: 2 });
      await expectStatus(client.get(`${CMS}/faulty`), 503, 'ServiceUnavailable');
      await client.get(PODS); // another resource is untouched
      await expectStatus(client.get(`${CMS}/faulty`), 503);
      expect((await client.get(`${CMS}/faulty`)).metadata.name).to.equal('faulty');
      expect(handle.hits).to.equal(2);
      api.failNext({ verb: 'patch', resource: 'pods/status', code: 409 });
      await client.create(PODS, pod('fault-status'));
      await expectStatus(client.patch(`${PODS}/fault-status/status`, { status: { phase: 'Running' } }, 'merge'), 409, 'Conflict');
      expect((await client.patch(`${PODS}/fault-status`, { metadata: { labels: { ok: 'yes' } } }, 'merge')).metadata.labels.ok).to.equal('yes');
    });

    it('adds latency', async function () {
      api.addLatency({ verb: 'list', resource: 'secrets', ms: 150, times: 1 });
      const started = Date.now();
      await client.get('/api/v1/namespaces/default/secrets');
      expect(Date.now() - started).to.be.at.least(140);
    });

    it('drops watch connections', async function () {
      const handle = client.watch(CMS, {}, () => undefined);
      const started = Date.now();
      while (api.activeWatchCount('configmaps') === 0 && Date.now() - started < 5000) await new Promise((r) => setTimeout(r, 5));
      expect(api.dropWatches({ resource: 'configmaps' })).to.equal(1);
      expect(await handle.done).to.equal(undefined);
      expect(api.activeWatchCount('configmaps')).to.equal(0);
    });

    it('records requests for assertions', async function () {
      await client.patch(`${CMS}/faulty`, { data: { a: 'b' } }, 'merge');
      const patches = api.requestsFor({ verb: 'patch', resource: 'configmaps', name: 'faulty' });
      expect(patches.at(-1)).to.include({ contentType: 'application/merge-patch+json', code: 200, namespace: 'default' });
    });
  });

  describe('leases (coordination.k8s.io/v1)', function () {
    it('supports create, get, update with conflicts, and list', async function () {
      const L = '/apis/coordination.k8s.io/v1/namespaces/default/leases';
      const lease = await client.create(L, {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: { name: 'fnr-gc' },
        spec: { holderIdentity: 'a', leaseDurationSeconds: 15, renewTime: '2025-01-01T00:00:00.000000Z' },
      });
      expect(lease.kind).to.equal('Lease');
      expect(lease.apiVersion).to.equal('coordination.k8s.io/v1');
      const taken = await client.replace(`${L}/fnr-gc`, { ...lease, spec: { ...lease.spec, holderIdentity: 'b' } });
      expect(taken.spec.holderIdentity).to.equal('b');
      const status = await expectStatus(client.replace(`${L}/fnr-gc`, { ...lease, spec: { ...lease.spec, holderIdentity: 'c' } }), 409);
      expect(status.message).to.contain('leases.coordination.k8s.io "fnr-gc"');
      expect(status.details).to.include({ group: 'coordination.k8s.io', kind: 'leases' });
      const missing = await expectStatus(client.get(`${L}/nope`), 404);
      expect(missing.message).to.equal('leases.coordination.k8s.io "nope" not found');
      expect(((await client.get(L)).items as KubeObject[]).map((i) => i.metadata.name)).to.deep.equal(['fnr-gc']);
    });

    it('keeps holderIdentity, leaseDurationSeconds and MicroTimes as kube-apiserver does (six digits, UTC), and rejects other times', async function () {
      const L = '/apis/coordination.k8s.io/v1/namespaces/default/leases';
      const lease = await client.create(L, {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: { name: 'micro' },
        spec: { holderIdentity: 'replica-1', leaseDurationSeconds: 7, acquireTime: '2025-01-01T01:00:00.123456+01:00', renewTime: '2025-01-01T00:00:01.000001Z', leaseTransitions: 2 },
      });
      expect(lease.spec).to.deep.equal({ holderIdentity: 'replica-1', leaseDurationSeconds: 7, acquireTime: '2025-01-01T00:00:00.123456Z', renewTime: '2025-01-01T00:00:01.000001Z', leaseTransitions: 2 });
      // Date.toISOString() has three digits: a real API server cannot parse that as a MicroTime.
      const bad = await expectStatus(client.replace(`${L}/micro`, { ...lease, spec: { ...lease.spec, renewTime: '2025-01-01T00:00:02.000Z' } }), 400, 'BadRequest');
      expect(bad.message).to.equal(
        'Lease in version "v1" cannot be handled as a Lease: parsing time "2025-01-01T00:00:02.000Z" as "2006-01-02T15:04:05.000000Z07:00": cannot parse ".000Z" as ".000000"',
      );
      await expectStatus(client.create(L, { metadata: { name: 'no-fraction' }, spec: { renewTime: '2025-01-01T00:00:02Z' } }), 400, 'BadRequest');
      await expectStatus(client.create(L, { metadata: { name: 'zero' }, spec: { leaseDurationSeconds: 0 } }), 422, 'Invalid');
      // an unconditional update (no resourceVersion) is allowed for leases, as for most types
      const { resourceVersion: _rv, ...metaWithoutRv } = lease.metadata;
      const released = await client.replace(`${L}/micro`, { ...lease, metadata: metaWithoutRv, spec: { ...lease.spec, holderIdentity: '' } });
      expect(released.spec.holderIdentity).to.equal('');
      expect(released.metadata.resourceVersion).to.not.equal(lease.metadata.resourceVersion);
      // a delete with a stale resourceVersion precondition is a conflict; the current one deletes
      await expectStatus(client.delete(`${L}/micro`, { preconditions: { resourceVersion: lease.metadata.resourceVersion } }), 409, 'Conflict');
      await client.delete(`${L}/micro`, { preconditions: { resourceVersion: released.metadata.resourceVersion } });
      await expectStatus(client.get(`${L}/micro`), 404, 'NotFound');
    });
  });
});

describe('k8s test bed: HTTPS with a bearer token', function () {
  let api: TestApiServer;

  before(async function () {
    api = await TestApiServer.start({ tls: true, token: 'sekrit' });
  });

  after(async function () {
    await api?.stop();
  });

  it('requires the token and serves with the generated CA', async function () {
    expect(api.url).to.match(/^https:\/\/127\.0\.0\.1:\d+$/);
    const good = new KubeRestClient({ url: api.url, token: 'sekrit', ca: api.caPem });
    const bad = new KubeRestClient({ url: api.url, token: 'wrong', ca: api.caPem });
    try {
      expect((await good.get('/api/v1/namespaces')).kind).to.equal('NamespaceList');
      const status = await expectStatus(bad.get('/api/v1/namespaces'), 401, 'Unauthorized');
      expect(status.message).to.equal('Unauthorized');
    } finally {
      good.close();
      bad.close();
    }
  });
});
