/**
 * Function pods for real (docs/node.md): fnr serve's pod runtime (in process) against the shared control plane,
 * whose node (LocalKubelet) delegates pods to the runc node. The pods come from fnr's inline template: the init
 * container copies the packaged wrapper server out of a wrapper-server image pulled from a real registry into an
 * emptyDir, the function container runs a real function image (static busybox + a shell script) with the wrapper
 * server as entrypoint, as uid 65532, read-only root filesystem, all capabilities dropped, gRPC readiness probe.
 * Reached by pod IP, then by Service name through the test DNS server answering from the EndpointSlices.
 * (test/cluster/function-pods.test.ts runs the same pods from fnr's manifests with the runner's ServiceAccount.)
 */
import { expect } from 'chai';

import { EvaluatorClient } from '../../src/lib/grpc/client.js';
import { RegistryMetadataSource } from '../../src/lib/pods/cluster/image-metadata.js';
import { RegistryClient } from '../../src/lib/registry/client.js';
import type { RunningServer } from '../../src/lib/serve.js';
import type { ControlPlane } from '../support/cluster/controlplane.js';
import { adminClient, namespace, sharedControlPlane, waitForClusterBinaries } from '../support/cluster/shared.js';
import type { KubeRestClient } from '../support/k8s/client.js';
import { eventually } from '../support/k8s/fixtures.js';
import { pushFunctionPodImages } from '../support/node/function-images.js';
import { networkWithAddress, RuncRuntime, TestDnsServer } from '../support/node/index.js';
import { RL } from '../support/pods/index.js';
import { TestRegistry } from '../support/registry/registry.js';
import { makeFunctionsDir, serveOptions, startInProcess } from '../support/serve.js';
import { TempDirs } from '../support/tmp.js';
import { PACKAGE_TIMEOUT_MS } from '../wrapper/support/package.js';

type KubeObject = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
type Namespace = { name: string; remove: () => Promise<void> };

describe('function pods under runc: fnr serve + the shared control plane + the runc node', function () {
  this.timeout(180_000);
  waitForClusterBinaries();
  const temp = new TempDirs();
  let registry: TestRegistry;
  let cp: ControlPlane;
  let kube: KubeRestClient;
  let ipNs: Namespace;
  let svcNs: Namespace;
  let dns: TestDnsServer;
  let fns: { configPath: string; functionsDir: string };
  let wrapperImage: string;
  let fnImage: string;
  let nsCounter = 0;
  /** The runc pod networks of this suite's pods: gone once the pods are. */
  const networks: string[] = [];

  before(async function () {
    this.timeout(PACKAGE_TIMEOUT_MS);
    registry = await TestRegistry.start({ mode: 'none' });
    const images = await pushFunctionPodImages(registry);
    ({ wrapperImage, fnImage } = images);
    console.log(`      wrapper-server + function images built and pushed in ${images.ms} ms`);
    cp = await sharedControlPlane();
    expect(cp.runtime, 'the shared control plane runs pods under runc').to.not.equal(undefined);
    kube = adminClient(cp);
    [ipNs, svcNs] = await Promise.all([namespace(cp, 'fn-ip'), namespace(cp, 'fn-svc')]);
    dns = await TestDnsServer.start(kube);
    fns = await makeFunctionsDir(await temp.make());
  });

  after(async () => {
    await dns?.stop();
    // Deleted at once (grace 0), the pods' runc networks go without waiting for the namespace controller.
    for (const ns of [ipNs, svcNs]) if (ns && kube) await kube.delete(`/api/v1/namespaces/${ns.name}/pods`, { gracePeriodSeconds: 0 }).catch(() => undefined);
    await ipNs?.remove();
    await svcNs?.remove();
    kube?.close();
    await registry?.stop();
    await temp.cleanup();
    // The node tears the pods down, their runc networks included.
    await eventually(() => !networks.some((n) => RuncRuntime.liveNetworks().includes(n)), 30_000, 100).catch(() => undefined);
    expect(networks.filter((n) => RuncRuntime.liveNetworks().includes(n))).to.deep.equal([]);
  });

  const serve = (namespace: string, pod: Record<string, unknown>): Promise<RunningServer> => {
    const base = serveOptions({ ...fns, disableRuntimes: 'exec' });
    return startInProcess({
      ...base,
      pod: {
        ...base.pod,
        namespace,
        wrapperServerImage: wrapperImage,
        metadata: new RegistryMetadataSource(new RegistryClient({ insecureRegistries: [registry.host] })),
        kubeconfig: cp.kubeconfigPath,
        owner: `node-test-${++nsCounter}`,
        leaseDurationMs: 0,
        ...pod,
      },
    });
  };

  const evaluate = async (running: RunningServer, namespace: string): Promise<{ pod: KubeObject; ms: number }> => {
    const client = new EvaluatorClient(`127.0.0.1:${running.port}`);
    try {
      const t = Date.now();
      const res = await client.evaluateRaw(fnImage, RL, { deadline: Date.now() + 120_000 });
      const ms = Date.now() - t;
      expect(res.resourceList.toString()).to.equal(RL.toString());
      expect(res.log.toString()).to.contain('fn ran as uid=65532 gid=65532');
      expect(res.trailers.get('fnr-evaluator')).to.deep.equal(['pod']);
      const pods = (await kube.get(`/api/v1/namespaces/${namespace}/pods`)).items as KubeObject[];
      expect(pods).to.have.length(1);
      const netns = await networkWithAddress(pods[0]!.status.podIP);
      expect(netns, 'the pod has a runc network of its own').to.be.a('string');
      if (!networks.includes(netns!)) networks.push(netns!);
      return { pod: pods[0]!, ms };
    } finally {
      client.close();
    }
  };

  it('--pod-address=pod-ip: the inline template runs for real and evaluates a ResourceList', async () => {
    const running = await serve(ipNs.name, { podAddress: 'pod-ip' });
    try {
      const { pod, ms } = await evaluate(running, ipNs.name);
      console.log(`      first call (pod create, wrapper + function image pull and unpack, init copy, runc start, gRPC Ready): ${ms} ms`);
      for (const t of cp.runtime!.images.timings) console.log(`        ${t.image}: skopeo pull ${t.pullMs} ms, unpack ${t.unpackMs} ms`);
      const fnStatus = (pod.status.containerStatuses as KubeObject[]).find((c) => c.name === 'function')!;
      expect(fnStatus.ready).to.equal(true);
      expect(fnStatus.containerID).to.match(/^runc:\/\//);
      expect(pod.status.podIP).to.match(/^198\.1[89]\./);
      expect((pod.status.initContainerStatuses as KubeObject[])[0].state.terminated.reason).to.equal('Completed');
      const fn = (pod.spec.containers as KubeObject[]).find((c) => c.name === 'function')!;
      expect(fn.securityContext).to.deep.include({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false });
      expect(fn.securityContext.capabilities).to.deep.equal({ drop: ['ALL'] });
      const logs = await cp.kubectl(['logs', '-n', ipNs.name, pod.metadata.name, '-c', 'function']);
      expect(logs.code, logs.stderr).to.equal(0);
      expect(logs.stdout).to.contain('wrapper server is ready');
      // A second call reuses the running pod.
      const again = await evaluate(running, ipNs.name);
      console.log(`      second call (warm pod): ${again.ms} ms`);
      expect(again.pod.metadata.uid).to.equal(pod.metadata.uid);
    } finally {
      await running.stop();
    }
  });

  it('--pod-address=service: the Service name resolves through the test DNS server (FNR_DNS_SERVER) to the pod', async () => {
    const running = await serve(svcNs.name, { podAddress: 'service', dnsServer: dns.address });
    try {
      const { pod } = await evaluate(running, svcNs.name);
      const name = `${pod.metadata.name}.${svcNs.name}.svc.cluster.local`;
      expect(dns.queries).to.include(name);
      // kube-controller-manager's endpoints controller keeps the Service's Endpoints (the DNS server read its EndpointSlice)
      const ep = await eventually(async () => {
        const e = await kube.get(`/api/v1/namespaces/${svcNs.name}/endpoints/${pod.metadata.name}`);
        return e.subsets?.[0]?.addresses?.length > 0 && e;
      }, 10_000, 100);
      expect(ep.subsets[0].addresses[0].ip).to.equal(pod.status.podIP);
    } finally {
      await running.stop();
    }
  });
});
