/**
 * LocalKubelet with `runtime: RuncRuntime`: pods created through the API (kubectl) run under runc; their status,
 * image pull failures with imagePullSecrets from the API, `kubectl logs` and graceful deletion go through the API
 * server as with a real kubelet.
 */
import { expect } from 'chai';

import { startTestBed, type TestBed } from '../support/k8s/index.js';
import { pushBusyboxImage } from '../support/node/fixtures.js';
import { RuncRuntime } from '../support/node/index.js';
import { run } from '../support/node/runc.js';
import { dockerConfigJson, TestRegistry } from '../support/registry/registry.js';

type KubeObject = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('LocalKubelet delegating pods to the runc node', function () {
  this.timeout(120_000);
  let registry: TestRegistry;
  let node: RuncRuntime;
  let bed: TestBed;
  let img: string;

  before(async () => {
    registry = await TestRegistry.start({ mode: 'htpasswd' });
    await pushBusyboxImage(registry, 'node/busybox:v1', await registry.writeAuthFile('testuser', 'testpass'));
    img = `${registry.host}/node/busybox:v1`;
    node = await RuncRuntime.create({ backoffMs: 300, maxBackoffMs: 2000, retryMs: 200 });
    bed = await startTestBed({ kubelet: { runtime: node }, clientNode: false });
    const secret = (name: string, password: string): KubeObject => ({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name, namespace: 'default' },
      type: 'kubernetes.io/dockerconfigjson',
      data: { '.dockerconfigjson': Buffer.from(dockerConfigJson(registry.host, 'testuser', password)).toString('base64') },
    });
    bed.api.registry.create('secrets', 'default', secret('good', 'testpass'));
    bed.api.registry.create('secrets', 'default', secret('bad', 'wrong'));
  });

  after(async () => {
    await bed?.stop();
    await node?.stop();
    await registry?.stop();
    expect(RuncRuntime.liveNetworks()).to.deep.equal([]);
  });

  const podYaml = (name: string, secret: string | undefined, script: string, pullPolicy = 'IfNotPresent'): string =>
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: 'default' },
      spec: {
        terminationGracePeriodSeconds: 5,
        ...(secret ? { imagePullSecrets: [{ name: secret }] } : {}),
        containers: [{ name: 'main', image: img, imagePullPolicy: pullPolicy, args: [script], readinessProbe: { exec: { command: ['sh', '-c', 'test -f /ready'] }, periodSeconds: 1 } }],
      },
    });

  const waitPod = async (name: string, check: (p: KubeObject | undefined) => boolean): Promise<KubeObject> => {
    try {
      return (await bed.api.waitFor('pods', 'default', name, check as never, 60_000)) as KubeObject;
    } catch (e) {
      throw new Error(`${(e as Error).message}; the pod: ${JSON.stringify(bed.api.registry.find('pods', 'default', name))}`, { cause: e });
    }
  };

  it('runs a pod created with kubectl: Ready via an exec probe, kubectl logs, graceful delete cleans up', async () => {
    const t = Date.now();
    const created = await bed.kubectl(['create', '--validate=false', '-f', '-'], { input: podYaml('web', 'good', 'echo hello from runc; touch /ready; trap "echo bye; exit 0" TERM; while true; do sleep 0.2; done') });
    expect(created.code, created.stderr).to.equal(0);
    const ready = await waitPod('web', (p) => p?.status?.conditions?.some((c: KubeObject) => c.type === 'Ready' && c.status === 'True'));
    console.log(`      kubectl create to Ready (pull + unpack + runc + exec probe): ${Date.now() - t} ms`);
    expect(ready.status.podIP).to.match(/^198\.1[89]\./);
    expect(ready.status.containerStatuses[0].imageID).to.match(/@sha256:/);
    const logs = await bed.kubectl(['logs', 'web']);
    expect(logs.stdout).to.equal('hello from runc\n');
    const netnsBefore = (await run('ip', ['netns', 'list'])).stdout;
    expect(netnsBefore).to.match(/fnrp-/);
    const deleted = await bed.kubectl(['delete', 'pod', 'web', '--wait=true']);
    expect(deleted.code, deleted.stderr).to.equal(0);
    expect(bed.api.registry.find('pods', 'default', 'web')).to.equal(undefined);
    expect(RuncRuntime.liveNetworks()).to.deep.equal([]);
  });

  it('reports ErrImagePull / ImagePullBackOff for missing and wrong pull credentials through the API (imagePullPolicy: Always)', async () => {
    for (const [name, secret] of [['no-secret', undefined], ['bad-secret', 'bad']] as const) {
      const created = await bed.kubectl(['create', '--validate=false', '-f', '-'], { input: podYaml(name, secret, 'true', 'Always') });
      expect(created.code, created.stderr).to.equal(0);
      const err = await waitPod(name, (p) => p?.status?.containerStatuses?.[0]?.state?.waiting?.reason === 'ErrImagePull');
      expect(err.status.containerStatuses[0].state.waiting.message).to.match(/authentication required|unauthorized/i);
      await waitPod(name, (p) => p?.status?.containerStatuses?.[0]?.state?.waiting?.reason === 'ImagePullBackOff');
      const get = await bed.kubectl(['get', 'pod', name]);
      expect(get.stdout).to.match(/ErrImagePull|ImagePullBackOff/);
      expect(get.stdout).to.contain('0/1');
      await bed.kubectl(['delete', 'pod', name, '--wait=true']);
    }
  });
});
