import { expect } from 'chai';
import { applyJsonPatch, applyMergePatch, applyStrategicMergePatch, JsonPatchApplyError } from '../support/k8s/patch.js';
import { resourceTypeByName } from '../support/k8s/resources.js';
import { matchLabels, parseFieldSelector, parseLabelSelector } from '../support/k8s/selectors.js';

const podStrategy = resourceTypeByName('pods').strategy;

describe('k8s test bed: patch formats', function () {
  it('merge patch (RFC 7386) replaces lists and deletes with null', function () {
    const out = applyMergePatch({ a: { b: 1, c: 2 }, list: [1, 2] }, { a: { b: null, d: 3 }, list: [3] });
    expect(out).to.deep.equal({ a: { c: 2, d: 3 }, list: [3] });
  });

  it('strategic merge patch merges containers, env and ports by key', function () {
    const original = {
      spec: {
        containers: [
          { name: 'a', image: 'a:1', env: [{ name: 'X', value: '1' }], ports: [{ containerPort: 80, protocol: 'TCP' }] },
          { name: 'b', image: 'b:1' },
        ],
        volumes: [{ name: 'v1', emptyDir: {} }],
      },
    };
    const patch = {
      spec: {
        containers: [{ name: 'a', env: [{ name: 'Y', value: '2' }], ports: [{ containerPort: 80, name: 'http' }] }, { name: 'c', image: 'c:1' }],
        volumes: [{ name: 'v1', $patch: 'delete' }],
      },
    };
    const out = applyStrategicMergePatch(original, patch, podStrategy) as Record<string, any>;
    expect(out.spec.containers.map((c: { name: string }) => c.name)).to.deep.equal(['a', 'b', 'c']);
    expect(out.spec.containers[0].env).to.deep.equal([{ name: 'X', value: '1' }, { name: 'Y', value: '2' }]);
    expect(out.spec.containers[0].ports).to.deep.equal([{ containerPort: 80, protocol: 'TCP', name: 'http' }]);
    expect(out.spec.volumes).to.deep.equal([]);
  });

  it('strategic merge patch honours $patch: replace, $deleteFromPrimitiveList, $retainKeys and $setElementOrder', function () {
    const original = { metadata: { finalizers: ['a', 'b'] }, spec: { containers: [{ name: 'a' }, { name: 'b' }], tolerations: [{ key: 'x' }] } };
    const out = applyStrategicMergePatch(
      original,
      {
        metadata: { finalizers: ['c'], '$deleteFromPrimitiveList/finalizers': ['a'] },
        spec: {
          '$setElementOrder/containers': [{ name: 'b' }, { name: 'a' }],
          containers: [{ name: 'z' }, { $patch: 'replace' }],
          tolerations: [{ key: 'y' }],
          strategy: { $retainKeys: ['type'], type: 'Recreate', rollingUpdate: null },
        },
      },
      podStrategy,
    ) as Record<string, any>;
    expect(out.metadata.finalizers).to.deep.equal(['b', 'c']);
    expect(out.spec.containers).to.deep.equal([{ name: 'z' }]);
    expect(out.spec.tolerations).to.deep.equal([{ key: 'y' }]);
    expect(out.spec.strategy).to.deep.equal({ type: 'Recreate' });
  });

  it('JSON patch (RFC 6902) applies add/remove/replace/move/copy/test and fails cleanly', function () {
    const doc = { a: [1, 2], b: { c: 'x' } };
    const out = applyJsonPatch(doc, [
      { op: 'add', path: '/a/-', value: 3 },
      { op: 'replace', path: '/b/c', value: 'y' },
      { op: 'copy', from: '/b/c', path: '/d' },
      { op: 'move', from: '/d', path: '/e' },
      { op: 'remove', path: '/a/0' },
      { op: 'test', path: '/e', value: 'y' },
      { op: 'add', path: '/f~1g', value: true },
    ]);
    expect(out).to.deep.equal({ a: [2, 3], b: { c: 'y' }, e: 'y', 'f/g': true });
    expect(doc).to.deep.equal({ a: [1, 2], b: { c: 'x' } });
    expect(() => applyJsonPatch(doc, [{ op: 'replace', path: '/missing', value: 1 }])).to.throw(JsonPatchApplyError);
    expect(() => applyJsonPatch(doc, [{ op: 'test', path: '/b/c', value: 'nope' }])).to.throw(JsonPatchApplyError);
  });
});

describe('k8s test bed: selectors', function () {
  it('parses every label selector operator', function () {
    const labels = { app: 'fn', tier: 'web', n: '5' };
    const ok = (s: string): boolean => matchLabels(parseLabelSelector(s), labels);
    expect(ok('')).to.equal(true);
    expect(ok('app=fn')).to.equal(true);
    expect(ok('app == fn , tier=web')).to.equal(true);
    expect(ok('app!=fn')).to.equal(false);
    expect(ok('missing!=x')).to.equal(true);
    expect(ok('tier in (web,db)')).to.equal(true);
    expect(ok('tier notin (web)')).to.equal(false);
    expect(ok('missing notin (web)')).to.equal(true);
    expect(ok('app')).to.equal(true);
    expect(ok('!app')).to.equal(false);
    expect(ok('n>4,n<6')).to.equal(true);
    expect(ok('fn.kpt.dev/image=x')).to.equal(false);
    expect(() => parseLabelSelector('app in (a')).to.throw();
    expect(() => parseLabelSelector('app=fn,,')).to.throw();
  });

  it('parses field selectors with escapes', function () {
    expect(parseFieldSelector('metadata.name=a,status.phase!=Running')).to.deep.equal([
      { field: 'metadata.name', op: '=', value: 'a' },
      { field: 'status.phase', op: '!=', value: 'Running' },
    ]);
    expect(parseFieldSelector('metadata.name==a\\,b')).to.deep.equal([{ field: 'metadata.name', op: '=', value: 'a,b' }]);
  });
});
