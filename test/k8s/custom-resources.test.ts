import { expect } from 'chai';
import * as k8s from '@kubernetes/client-node';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parse } from 'yaml';
import type { KubeObject, TestBed } from '../support/k8s/index.js';
import { customResourceScope, registerCrd, registerCustomResource, startTestBed } from '../support/k8s/index.js';
import { parseCelSubset } from '../support/k8s/custom-resources.js';
import { eventually } from '../support/k8s/fixtures.js';
import { REPO_ROOT } from '../support/serve.js';

const NS = 'crs';
const GROUP = 'config.porch.kpt.dev';
const VERSION = 'v1alpha1';
const PLURAL = 'functionconfigs';

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

function fc(name: string, spec: Record<string, unknown> = { image: name, podExecutor: { tags: ['v1'] } }, labels?: Record<string, string>): KubeObject {
  return { apiVersion: `${GROUP}/${VERSION}`, kind: 'FunctionConfig', metadata: { name, ...(labels ? { labels } : {}) }, spec };
}

describe('k8s test bed: custom resources (registered from manifests/function-config/crds/functionconfigs.yaml)', function () {
  this.timeout(60_000);
  let bed: TestBed;
  let api: k8s.CustomObjectsApi;
  const params = { group: GROUP, version: VERSION, namespace: NS, plural: PLURAL };

  let unregister: () => void = () => {};

  before(async function () {
    unregister = customResourceScope();
    const crd = parse(await readFile(path.join(REPO_ROOT, 'manifests', 'function-config', 'crds', 'functionconfigs.yaml'), 'utf8')) as KubeObject;
    registerCrd(crd);
    bed = await startTestBed({ namespaces: [NS], kubelet: false });
    api = bed.kubeConfig.makeApiClient(k8s.CustomObjectsApi);
  });

  after(async function () {
    await bed?.stop();
    unregister();
  });

  it('client-node: create, get, list with a label selector, 404, 409, 422 from the schema, defaults and generation', async function () {
    const created = (await api.createNamespacedCustomObject({ ...params, body: fc('a', { image: 'a', podExecutor: { tags: ['v1'] } }, { tier: 'x' }) })) as KubeObject;
    expect(created.metadata.generation).to.equal(1);
    expect(created.metadata.uid).to.be.a('string');
    expect(created.spec.podExecutor.timeToLive, 'schema default').to.equal('30m');
    await api.createNamespacedCustomObject({ ...params, body: fc('b', undefined, { tier: 'y' }) });
    const got = (await api.getNamespacedCustomObject({ ...params, name: 'a' })) as KubeObject;
    expect(got.kind).to.equal('FunctionConfig');
    expect(got.apiVersion).to.equal(`${GROUP}/${VERSION}`);
    const list = (await api.listNamespacedCustomObject({ ...params, labelSelector: 'tier=x' })) as KubeObject;
    expect(list.kind).to.equal('FunctionConfigList');
    expect(list.items.map((i: KubeObject) => i.metadata.name)).to.deep.equal(['a']);
    const byName = (await api.listNamespacedCustomObject({ ...params, fieldSelector: 'metadata.name=b' })) as KubeObject;
    expect(byName.items.map((i: KubeObject) => i.metadata.name)).to.deep.equal(['b']);

    const missing = await apiError(api.getNamespacedCustomObject({ ...params, name: 'nope' }));
    expect(missing.code).to.equal(404);
    expect(missing.status.message).to.equal('functionconfigs.config.porch.kpt.dev "nope" not found');
    const dup = await apiError(api.createNamespacedCustomObject({ ...params, body: fc('a') }));
    expect(dup.code).to.equal(409);
    expect(dup.status.reason).to.equal('AlreadyExists');
    const bad = await apiError(api.createNamespacedCustomObject({ ...params, body: fc('c', { prefixes: [''], binaryExecutor: { tags: [], path: '' } }) }));
    expect(bad.code).to.equal(422);
    const fields = (bad.status.details.causes as Array<{ field: string }>).map((c) => c.field).sort();
    expect(fields).to.deep.equal(['spec.binaryExecutor.path', 'spec.binaryExecutor.tags', 'spec.image']);
    const badDuration = await apiError(api.createNamespacedCustomObject({ ...params, body: fc('d', { image: 'd', podExecutor: { timeToLive: 'soon' } }) }));
    expect(badDuration.code).to.equal(422);

    // generation: +1 on a spec change, unchanged on a metadata-only change
    const labelled = (await api.patchNamespacedCustomObject({ ...params, name: 'a', body: { metadata: { labels: { more: 'yes' } } } }, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch))) as KubeObject;
    expect(labelled.metadata.generation).to.equal(1);
    const changed = (await api.patchNamespacedCustomObject({ ...params, name: 'a', body: { spec: { prefixes: ['example.com'] } } }, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch))) as KubeObject;
    expect(changed.metadata.generation).to.equal(2);
  });

  it('client-node: status is a subresource (writes to the object keep it; /status writes change only it)', async function () {
    await api.createNamespacedCustomObject({ ...params, body: fc('s') });
    const merge = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);
    const withStatus = (await api.patchNamespacedCustomObjectStatus({ ...params, name: 's', body: { status: { functionRunnerObservedGeneration: 1, error: 'x' }, spec: { image: 'ignored' } } }, merge)) as KubeObject;
    expect(withStatus.status).to.deep.equal({ functionRunnerObservedGeneration: 1, error: 'x' });
    expect(withStatus.spec.image).to.equal('s');
    expect(withStatus.metadata.generation).to.equal(1);
    const main = (await api.patchNamespacedCustomObject({ ...params, name: 's', body: { status: { error: 'no' } } }, merge)) as KubeObject;
    expect(main.status.error).to.equal('x');
  });

  it('client-node Watch: from a resourceVersion, ADDED, MODIFIED and DELETED', async function () {
    const list = (await api.listNamespacedCustomObject(params)) as KubeObject;
    const events: string[] = [];
    const watch = new k8s.Watch(bed.kubeConfig);
    const req = await watch.watch(
      `/apis/${GROUP}/${VERSION}/namespaces/${NS}/${PLURAL}`,
      { resourceVersion: list.metadata.resourceVersion },
      (type: string, o: KubeObject) => events.push(`${type} ${o.metadata.name} ${o.metadata.generation}`),
      () => undefined,
    );
    try {
      await api.createNamespacedCustomObject({ ...params, body: fc('w') });
      await api.replaceNamespacedCustomObject({ ...params, name: 'w', body: { ...(await api.getNamespacedCustomObject({ ...params, name: 'w' })), spec: { image: 'w', binaryExecutor: { tags: ['v1'], path: 'w' } } } });
      await api.deleteNamespacedCustomObject({ ...params, name: 'w' });
      await eventually(() => events.length >= 3);
      expect(events).to.deep.equal(['ADDED w 1', 'MODIFIED w 2', 'DELETED w 2']);
    } finally {
      req.abort();
    }
  });

  it('kubectl: discovery, apply (create, then configure by merge patch), get with the printer columns, delete', async function () {
    const resources = await bed.kubectl(['api-resources', `--api-group=${GROUP}`, '--no-headers']);
    expect(resources.code, resources.stderr).to.equal(0);
    expect(resources.stdout).to.match(/^functionconfigs\s+config\.porch\.kpt\.dev\/v1alpha1\s+true\s+FunctionConfig/m);
    const doc = (spec: string): string => `apiVersion: ${GROUP}/${VERSION}\nkind: FunctionConfig\nmetadata:\n  name: k\n  namespace: ${NS}\nspec:\n${spec}`;
    const first = await bed.kubectl(['apply', '--validate=false', '-f', '-'], { input: doc('  image: k\n  podExecutor:\n    tags: [v1]\n') });
    expect(first.code, first.stderr).to.equal(0);
    expect(first.stdout.trim()).to.equal('functionconfig.config.porch.kpt.dev/k created');
    const again = await bed.kubectl(['apply', '--validate=false', '-f', '-'], { input: doc('  image: k\n  podExecutor:\n    tags: [v2]\n') });
    expect(again.code, again.stderr).to.equal(0);
    expect(again.stdout.trim()).to.equal('functionconfig.config.porch.kpt.dev/k configured');
    const patches = bed.api.requestsFor({ verb: 'patch', resource: PLURAL, name: 'k' });
    expect(patches.map((r) => r.contentType)).to.deep.equal(['application/merge-patch+json']);
    const stored = bed.api.registry.get(PLURAL, NS, 'k');
    expect(stored.spec.podExecutor.tags).to.deep.equal(['v2']);
    expect(stored.metadata.generation).to.equal(2);
    bed.api.registry.patch(PLURAL, NS, 'k', 'application/merge-patch+json', { status: { functionRunnerObservedGeneration: 2 } }, { subresource: 'status' });
    const table = await bed.kubectl(['get', 'functionconfigs', '-n', NS, 'k']);
    expect(table.code, table.stderr).to.equal(0);
    const [header, row] = table.stdout.trim().split('\n');
    expect(header!.split(/\s{2,}/)).to.deep.equal(['NAME', 'SERVER APPLIED', 'FNRUNNER APPLIED', 'CONTROLLER APPLIED', 'AGE']);
    expect(row!.split(/\s+/).slice(0, 2)).to.deep.equal(['k', '2']);
    const yaml = await bed.kubectl(['get', 'functionconfig', 'k', '-n', NS, '-o', 'jsonpath={.spec.podExecutor.timeToLive}']);
    expect(yaml.stdout).to.equal('30m');
    const del = await bed.kubectl(['delete', 'functionconfig', 'k', '-n', NS]);
    expect(del.code, del.stderr).to.equal(0);
    expect(bed.api.registry.find(PLURAL, NS, 'k')).to.equal(undefined);
    const gone = await bed.kubectl(['get', 'functionconfig', 'k', '-n', NS]);
    expect(gone.code).to.not.equal(0);
    expect(gone.stderr).to.include('functionconfigs.config.porch.kpt.dev "k" not found');
  });

  it('registers any group/version/plural/kind (generic), served beside the built-in types', async function () {
    registerCustomResource({ group: 'example.fnr.dev', version: 'v1', plural: 'widgets', kind: 'Widget', shortNames: ['wd'], printerColumns: [{ name: 'Size', jsonPath: '.spec.size', type: 'integer' }] });
    const r = await bed.kubectl(['apply', '--validate=false', '-f', '-'], { input: `apiVersion: example.fnr.dev/v1\nkind: Widget\nmetadata: {name: w1, namespace: ${NS}, labels: {a: b}}\nspec: {size: 3}\n` });
    expect(r.code, r.stderr).to.equal(0);
    const got = await bed.kubectl(['get', 'wd', '-n', NS, '-l', 'a=b', '--no-headers']);
    expect(got.code, got.stderr).to.equal(0);
    expect(got.stdout.split(/\s+/).slice(0, 2)).to.deep.equal(['w1', '3']);
    const widgets = (await api.listNamespacedCustomObject({ group: 'example.fnr.dev', version: 'v1', namespace: NS, plural: 'widgets' })) as KubeObject;
    expect(widgets.items).to.have.length(1);
  });

  it('kubectl: an object without any executor is refused by the CRD\'s CEL rule in kube-apiserver v1.37\'s words, on create and on update', async function () {
    const none = `apiVersion: ${GROUP}/${VERSION}\nkind: FunctionConfig\nmetadata: {name: empty, namespace: ${NS}}\nspec: {image: empty}\n`;
    const r = await bed.kubectl(['apply', '--validate=false', '-f', '-'], { input: none });
    expect(r.code).to.not.equal(0);
    expect(r.stderr).to.contain('The FunctionConfig "empty" is invalid: spec: Invalid value: At least one configuration must be specified');
    expect(bed.api.registry.find(PLURAL, NS, 'empty')).to.equal(undefined);
    const ok = await bed.kubectl(['apply', '--validate=false', '-f', '-'], { input: none.replace('spec: {image: empty}', 'spec: {image: empty, goExecutor: {tags: [v1]}}') });
    expect(ok.code, ok.stderr).to.equal(0);
    const dropped = await bed.kubectl(['apply', '--validate=false', '-f', '-'], { input: none });
    expect(dropped.code).to.not.equal(0);
    expect(dropped.stderr).to.contain('At least one configuration must be specified');
    await bed.kubectl(['delete', 'functionconfig', 'empty', '-n', NS]);
  });

  it('models the CEL subset the CRDs use and refuses rules outside it', () => {
    expect(() => parseCelSubset('has(self.a) || (has(self.b.c) && !has(self.d))')).to.not.throw();
    expect(() => parseCelSubset('self.size() > 1')).to.throw(/outside the modelled subset/);
    expect(() => parseCelSubset('has(self.a) ||')).to.throw(/outside the modelled subset/);
  });
});
