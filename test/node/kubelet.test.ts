/**
 * LocalKubelet with `runtime: RuncRuntime`, as the node of the shared control plane: pods created through the API
 * (kubectl) run under runc; their status, image pull failures with imagePullSecrets from the API, `kubectl logs`
 * and graceful deletion go through kube-apiserver as with a real kubelet.
 */
import { expect } from 'chai';

import type { ControlPlane } from '../support/cluster/controlplane.js';
import { adminClient, namespace, sharedControlPlane, waitForClusterBinaries } from '../support/cluster/shared.js';
import { KubeRequestError, type KubeRestClient } from '../support/k8s/client.js';
import { eventually } from '../support/k8s/fixtures.js';
import { pushBusyboxImage } from '../support/node/fixtures.js';
import { networkWithAddress, RuncRuntime } from '../support/node/index.js';
import { run } from '../support/node/runc.js';
import { dockerConfigJson, TestRegistry } from '../support/registry/registry.js';

type KubeObject = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('LocalKubelet delegating pods to the runc node', function () {
  this.timeout(120_000);
  waitForClusterBinaries();
  let registry: TestRegistry;
  let cp: ControlPlane;
  let ns: { name: string; remove: () => Promise<void> };
  let client: KubeRestClient;
  let img: string;
  /** The pod networks this suite's pods had (all gone once the suite is done). */
  const networks: string[] = [];

  before(async () => {
    registry = await TestRegistry.start({ mode: 'htpasswd' });
    await pushBusyboxImage(registry, 'node/busybox:v1', await registry.writeAuthFile('testuser', 'testpass'));
    img = `${registry.host}/node/busybox:v1`;
    cp = await sharedControlPlane();
    expect(cp.runtime, 'the shared control plane runs pods under runc').to.not.equal(undefined);
    ns = await namespace(cp, 'node-kubelet');
    client = adminClient(cp);
    const secret = (name: string, password: string): KubeObject => ({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name },
      type: 'kubernetes.io/dockerconfigjson',
      data: { '.dockerconfigjson': Buffer.from(dockerConfigJson(registry.host, 'testuser', password)).toString('base64') },
    });
    await client.create(`/api/v1/namespaces/${ns.name}/secrets`, secret('good', 'testpass'));
    await client.create(`/api/v1/namespaces/${ns.name}/secrets`, secret('bad', 'wrong'));
  });

  after(async () => {
    await ns?.remove();
    client?.close();
    await registry?.stop();
    const live = RuncRuntime.liveNetworks();
    expect(networks.filter((n) => live.includes(n))).to.deep.equal([]);
  });

  const podYaml = (name: string, secret: string | undefined, script: string, pullPolicy = 'IfNotPresent'): string =>
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: ns.name },
      spec: {
        terminationGracePeriodSeconds: 5,
        ...(secret ? { imagePullSecrets: [{ name: secret }] } : {}),
        containers: [{ name: 'main', image: img, imagePullPolicy: pullPolicy, args: [script], readinessProbe: { exec: { command: ['sh', '-c', 'test -f /ready'] }, periodSeconds: 1 } }],
      },
    });

  const find = async (name: string): Promise<KubeObject | undefined> =>
    client.get(`/api/v1/namespaces/${ns.name}/pods/${name}`).catch((e: unknown) => {
      if (e instanceof KubeRequestError && e.code === 404) return undefined;
      throw e;
    });

  const waitPod = async (name: string, check: (p: KubeObject | undefined) => boolean): Promise<KubeObject> => {
    let last: KubeObject | undefined;
    try {
      return await eventually(async () => {
        last = await find(name);
        return check(last) && last!;
      }, 60_000, 100);
    } catch (e) {
      throw new Error(`${(e as Error).message}; the pod: ${JSON.stringify(last)}`, { cause: e });
    }
  };

  it('runs a pod created with kubectl: Ready via an exec probe, kubectl logs, graceful delete cleans up', async () => {
    const t = Date.now();
    const created = await cp.kubectl(['create', '-f', '-'], { input: podYaml('web', 'good', 'echo hello from runc; touch /ready; trap "echo bye; exit 0" TERM; while true; do sleep 0.2; done') });
    expect(created.code, created.stderr).to.equal(0);
    const ready = await waitPod('web', (p) => p?.status?.conditions?.some((c: KubeObject) => c.type === 'Ready' && c.status === 'True'));
    console.log(`      kubectl create to Ready (pull + unpack + runc + exec probe): ${Date.now() - t} ms`);
    expect(ready.status.podIP).to.match(/^198\.1[89]\./);
    expect(ready.status.containerStatuses[0].imageID).to.match(/@sha256:/);
    const logs = await cp.kubectl(['logs', '-n', ns.name, 'web']);
    expect(logs.stdout).to.equal('hello from runc\n');
    const netnsBefore = (await run('ip', ['netns', 'list'])).stdout;
    expect(netnsBefore).to.match(/fnrp-/);
    const netns = await networkWithAddress(ready.status.podIP);
    expect(netns, 'the pod has a network namespace of its own').to.be.a('string');
    networks.push(netns!);
    const deleted = await cp.kubectl(['delete', 'pod', '-n', ns.name, 'web', '--wait=true']);
    expect(deleted.code, deleted.stderr).to.equal(0);
    expect(await find('web')).to.equal(undefined);
    expect(RuncRuntime.liveNetworks()).to.not.include(netns);
  });

  it('reports ErrImagePull / ImagePullBackOff for missing and wrong pull credentials through the API (imagePullPolicy: Always)', async () => {
    for (const [name, secret] of [['no-secret', undefined], ['bad-secret', 'bad']] as const) {
      const created = await cp.kubectl(['create', '-f', '-'], { input: podYaml(name, secret, 'true', 'Always') });
      expect(created.code, created.stderr).to.equal(0);
      const err = await waitPod(name, (p) => p?.status?.containerStatuses?.[0]?.state?.waiting?.reason === 'ErrImagePull');
      expect(err.status.containerStatuses[0].state.waiting.message).to.match(/authentication required|unauthorized/i);
      await waitPod(name, (p) => p?.status?.containerStatuses?.[0]?.state?.waiting?.reason === 'ImagePullBackOff');
      const get = await cp.kubectl(['get', 'pod', '-n', ns.name, name]);
      expect(get.stdout).to.match(/ErrImagePull|ImagePullBackOff/);
      expect(get.stdout).to.contain('0/1');
      await cp.kubectl(['delete', 'pod', '-n', ns.name, name, '--wait=true']);
    }
  });
});
