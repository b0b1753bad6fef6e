import { expect } from 'chai';
import type { KubeObject, TestBed } from '../support/k8s/index.js';
import { KUBECTL_PATH, kubectlAvailable, startTestBed } from '../support/k8s/index.js';
import { httpServerCommand } from '../support/k8s/fixtures.js';
import { skipOutsideCi } from '../support/skip.js';

const POD_YAML = `apiVersion: v1
kind: Pod
metadata:
  name: fn-abc
  labels: {app: fn, fn-image-hash: abc123}
spec:
  containers:
  - name: function
    image: example.com/fn/unmapped:v1
    command: [sleep, "100"]
`;

function readyPodYaml(name: string): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels: { app: 'ready' } },
    spec: { containers: [{ name: 'function', image: 'local/fn:v1', command: httpServerCommand(9446), ports: [{ containerPort: 9446 }] }] },
  });
}

describe('k8s test bed: fidelity with the real kubectl', function () {
  this.timeout(90_000);
  let bed: TestBed;

  before(async function () {
    if (!kubectlAvailable()) skipOutsideCi(this, `${KUBECTL_PATH} is not installed (set $KUBECTL to use another binary)`);
    bed = await startTestBed({ clientNode: false, kubelet: { imageMap: { 'local/*': {} } } });
  });

  after(async function () {
    await bed?.stop();
  });

  const kubectl = async (args: string[], input?: string): Promise<{ code: number; stdout: string; stderr: string }> => bed.kubectl(args, { input });
  const ok = async (args: string[], input?: string): Promise<string> => {
    const r = await kubectl(args, input);
    expect(r.code, `kubectl ${args.join(' ')}\n${r.stderr}`).to.equal(0);
    return r.stdout;
  };

  it('reports the server version and API resources (discovery)', async function () {
    const version = JSON.parse(await ok(['version', '-o', 'json'])) as KubeObject;
    expect(version.serverVersion.gitVersion).to.match(/^v1\.32\./);
    const resources = await ok(['api-resources', '--no-headers']);
    expect(resources).to.match(/^pods\s+po\s+v1\s+true\s+Pod$/m);
    expect(resources).to.match(/^leases\s+coordination\.k8s\.io\/v1\s+true\s+Lease$/m);
    expect(resources).to.match(/^namespaces\s+ns\s+v1\s+false\s+Namespace$/m);
  });

  it('creates from YAML, and reports AlreadyExists the way kubectl prints it', async function () {
    expect(await ok(['create', '--validate=false', '-f', '-'], POD_YAML)).to.equal('pod/fn-abc created\n');
    const again = await kubectl(['create', '--validate=false', '-f', '-'], POD_YAML);
    expect(again.code).to.equal(1);
    expect(again.stderr).to.equal('Error from server (AlreadyExists): error when creating "STDIN": pods "fn-abc" already exists\n');
  });

  it('gets with label selectors, -o name and -o json, and prints NotFound', async function () {
    expect(await ok(['get', 'pods', '-l', 'app=fn,fn-image-hash in (abc123,zzz)', '-o', 'name'])).to.equal('pod/fn-abc\n');
    const none = await kubectl(['get', 'pods', '-l', 'app!=fn', '-o', 'name']);
    expect(none.code).to.equal(0);
    expect(none.stdout).to.equal('');
    const json = JSON.parse(await ok(['get', 'pods', '-l', 'fn-image-hash', '-o', 'json'])) as KubeObject;
    expect(json.kind).to.equal('List');
    expect(json.items[0].metadata.name).to.equal('fn-abc');
    expect(json.items[0].spec.restartPolicy).to.equal('Always');
    const one = JSON.parse(await ok(['get', 'pod', 'fn-abc', '-o', 'json'])) as KubeObject;
    expect(one.metadata.uid).to.be.a('string');
    const table = await ok(['get', 'pods']);
    expect(table).to.match(/^NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\nfn-abc\s+0\/1\s+\S+\s+0\s+\d+s\n$/);
    const missing = await kubectl(['get', 'pod', 'nope']);
    expect(missing.code).to.equal(1);
    expect(missing.stderr).to.equal('Error from server (NotFound): pods "nope" not found\n');
  });

  it('pages with --chunk-size through continue tokens', async function () {
    await ok(['create', '--validate=false', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'chunk-a' } }));
    await ok(['create', '--validate=false', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'chunk-b' } }));
    expect(await ok(['get', 'configmaps', '-o', 'name', '--chunk-size=1'])).to.equal('configmap/chunk-a\nconfigmap/chunk-b\n');
    expect(bed.api.requestsFor({ verb: 'list', resource: 'configmaps' }).some((r) => r.query.continue && r.query.limit === '1')).to.equal(true);
  });

  it('labels, annotates and patches (merge, strategic, json) with the right content types', async function () {
    expect(await ok(['label', 'pod', 'fn-abc', 'tier=x'])).to.equal('pod/fn-abc labeled\n');
    expect(await ok(['annotate', 'pod', 'fn-abc', 'note=hi'])).to.equal('pod/fn-abc annotated\n');
    expect(await ok(['patch', 'pod', 'fn-abc', '--type', 'merge', '-p', '{"metadata":{"labels":{"m":"1"}}}'])).to.equal('pod/fn-abc patched\n');
    expect(await ok(['patch', 'pod', 'fn-abc', '-p', '{"spec":{"containers":[{"name":"function","image":"example.com/fn/unmapped:v2"}]}}'])).to.equal(
      'pod/fn-abc patched\n',
    );
    expect(await ok(['patch', 'pod', 'fn-abc', '--type', 'json', '-p', '[{"op":"add","path":"/metadata/labels/j","value":"k"}]'])).to.equal('pod/fn-abc patched\n');
    const pod = JSON.parse(await ok(['get', 'pod', 'fn-abc', '-o', 'json'])) as KubeObject;
    expect(pod.metadata.labels).to.include({ tier: 'x', m: '1', j: 'k', app: 'fn' });
    expect(pod.metadata.annotations).to.include({ note: 'hi' });
    expect(pod.spec.containers[0].image).to.equal('example.com/fn/unmapped:v2');
    const types = bed.api.requestsFor({ verb: 'patch', resource: 'pods', name: 'fn-abc' }).map((r) => r.contentType);
    expect(types).to.deep.equal([
      'application/merge-patch+json',
      'application/merge-patch+json',
      'application/merge-patch+json',
      'application/strategic-merge-patch+json',
      'application/json-patch+json',
    ]);
    const noop = await ok(['patch', 'pod', 'fn-abc', '--type', 'merge', '-p', '{"metadata":{"labels":{"m":"1"}}}']);
    expect(noop).to.equal('pod/fn-abc patched (no change)\n');
  });

  it('prints 422 Invalid and 409 Conflict errors as kubectl does', async function () {
    const bad = await kubectl(['create', '--validate=false', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'Bad_Name' } }));
    expect(bad.code).to.equal(1);
    expect(bad.stderr).to.match(/^The ConfigMap "Bad_Name" is invalid: metadata\.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of/);
    const immutable = await kubectl(['patch', 'pod', 'fn-abc', '-p', '{"spec":{"restartPolicy":"Never"}}']);
    expect(immutable.code).to.equal(1);
    expect(immutable.stderr).to.match(/^The Pod "fn-abc" is invalid: spec: Forbidden: pod updates may not change fields other than/);
    const cm = JSON.parse(await ok(['create', '--validate=false', '-o', 'json', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'stale' }, data: { v: '1' } }))) as KubeObject;
    await ok(['patch', 'configmap', 'stale', '--type', 'merge', '-p', '{"data":{"v":"2"}}']);
    const stale = await kubectl(['replace', '--validate=false', '-f', '-'], JSON.stringify({ ...cm, data: { v: '3' } }));
    expect(stale.code).to.equal(1);
    expect(stale.stderr).to.equal(
      'Error from server (Conflict): error when replacing "STDIN": Operation cannot be fulfilled on configmaps "stale": the object has been modified; please apply your changes to the latest version and try again\n',
    );
  });

  it('applies twice (created, then configured through a strategic merge patch)', async function () {
    const v1 = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  k: v1\n  gone: x\n';
    expect(await ok(['apply', '--validate=false', '-f', '-'], v1)).to.equal('configmap/applied created\n');
    expect(await ok(['apply', '--validate=false', '-f', '-'], v1.replace('k: v1', 'k: v2').replace('  gone: x\n', ''))).to.equal('configmap/applied configured\n');
    const cm = JSON.parse(await ok(['get', 'configmap', 'applied', '-o', 'json'])) as KubeObject;
    expect(cm.data).to.deep.equal({ k: 'v2' });
    expect(cm.metadata.annotations['kubectl.kubernetes.io/last-applied-configuration']).to.contain('"k":"v2"');
    expect(bed.api.requestsFor({ verb: 'patch', resource: 'configmaps', name: 'applied' }).map((r) => r.contentType)).to.deep.equal([
      'application/strategic-merge-patch+json',
    ]);
    expect(await ok(['apply', '--validate=false', '-f', '-'], v1.replace('k: v1', 'k: v2').replace('  gone: x\n', ''))).to.equal('configmap/applied unchanged\n');
  });

  it('streams watch events with get -w --output-watch-events, including selector transitions', async function () {
    const watch = bed.kubectlStream(['get', 'pods', '-l', 'gc=yes', '-w', '--output-watch-events', '--no-headers']);
    // The initial list is empty; wait until kubectl's watch is open before changing anything.
    const started = Date.now();
    while (bed.api.activeWatchCount('pods') < 2 && Date.now() - started < 20_000) await new Promise((r) => setTimeout(r, 20));
    await ok(['label', 'pod', 'fn-abc', 'gc=yes']);
    await ok(['label', 'pod', 'fn-abc', 'other=1']);
    await ok(['label', 'pod', 'fn-abc', 'gc-']);
    const lines = await watch.waitFor((l) => l.length >= 3);
    expect(lines.slice(0, 3).map((l) => l.trim().split(/\s+/).slice(0, 2))).to.deep.equal([
      ['ADDED', 'fn-abc'],
      ['MODIFIED', 'fn-abc'],
      ['DELETED', 'fn-abc'],
    ]);
    await watch.stop();

    const table = bed.kubectlStream(['get', 'pods', 'fn-abc', '-w', '--output-watch-events']);
    await table.waitFor((l) => l.some((x) => x.startsWith('ADDED')));
    await ok(['annotate', 'pod', 'fn-abc', 'again=1']);
    const tableLines = await table.waitFor((l) => l.some((x) => x.startsWith('MODIFIED')));
    expect(tableLines[0]).to.match(/^EVENT\s+NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE$/);
    await table.stop();
  });

  it('deletes an unscheduled pod at once', async function () {
    expect(await ok(['delete', 'pod', 'fn-abc'])).to.equal('pod "fn-abc" deleted\n');
    expect((await kubectl(['get', 'pod', 'fn-abc'])).code).to.equal(1);
  });

  it('waits for Ready on a pod the local kubelet runs, shows its IP, logs, and deletes it gracefully', async function () {
    expect(await ok(['create', '--validate=false', '-f', '-'], readyPodYaml('fn-ready'))).to.equal('pod/fn-ready created\n');
    expect(await ok(['wait', '--for=condition=Ready', 'pod/fn-ready', '--timeout=60s'])).to.equal('pod/fn-ready condition met\n');
    const wide = await ok(['get', 'pod', 'fn-ready', '-o', 'wide']);
    const row = wide.split('\n')[1]!.split(/\s+/);
    expect(row.slice(0, 3)).to.deep.equal(['fn-ready', '1/1', 'Running']);
    expect(row[5]).to.match(/^127\.\d+\.\d+\.\d+$/);
    expect(row[6]).to.equal('local-node');
    const logs = await ok(['logs', 'fn-ready']);
    expect(logs).to.match(/^listening on 127\.\d+\.\d+\.\d+:9446\n/);
    const watch = bed.kubectlStream(['get', 'pods', 'fn-ready', '-w', '--output-watch-events', '--no-headers']);
    await watch.waitFor((l) => l.some((x) => x.startsWith('ADDED')));
    expect(await ok(['delete', 'pod', 'fn-ready'])).to.equal('pod "fn-ready" deleted\n');
    const events = await watch.waitFor((l) => l.some((x) => x.startsWith('DELETED')));
    expect(events.map((l) => l.trim().split(/\s+/)[0])).to.include.members(['ADDED', 'MODIFIED', 'DELETED']);
    await watch.stop();
  });

  it('works with leases (coordination.k8s.io)', async function () {
    const lease = { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: 'fnr-leader' }, spec: { holderIdentity: 'me', leaseDurationSeconds: 15 } };
    expect(await ok(['create', '--validate=false', '-f', '-'], JSON.stringify(lease))).to.equal('lease.coordination.k8s.io/fnr-leader created\n');
    expect(await ok(['get', 'leases', '-o', 'jsonpath={.items[0].spec.holderIdentity}'])).to.equal('me');
    expect(await ok(['delete', 'lease', 'fnr-leader'])).to.equal('lease.coordination.k8s.io "fnr-leader" deleted\n');
  });
});

describe('k8s test bed: kubectl over HTTPS with a bearer token', function () {
  this.timeout(60_000);
  let bed: TestBed;

  before(async function () {
    if (!kubectlAvailable()) skipOutsideCi(this, `${KUBECTL_PATH} is not installed (set $KUBECTL to use another binary)`);
    bed = await startTestBed({ clientNode: false, server: { tls: true, token: 'test-token' }, kubelet: false });
  });

  after(async function () {
    await bed?.stop();
  });

  it('authenticates with the token and verifies the CA', async function () {
    const r = await bed.kubectl(['get', 'namespaces', '-o', 'name']);
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout).to.contain('namespace/default\n');
    expect(bed.url).to.match(/^https:/);
  });

  it('prints Unauthorized for a wrong token', async function () {
    const r = await bed.kubectl(['get', 'namespaces', '--token', 'wrong']);
    expect(r.code).to.equal(1);
    expect(r.stderr).to.contain('error: You must be logged in to the server (Unauthorized)');
  });
});
