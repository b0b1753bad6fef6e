/**
 * Function pods for real (docs/node.md): fnr serve's pod runtime (in process) against the in-process test
 * API server, with LocalKubelet delegating pods to the runc node. The pods come from fnr's inline template: the init
 * container copies the packaged wrapper server out of a wrapper-server image pulled from a real registry into an
 * emptyDir, the function container runs a real function image (static busybox + a shell script) with the wrapper
 * server as entrypoint, as uid 65532, read-only root filesystem, all capabilities dropped, gRPC readiness probe.
 * Reached by pod IP, then by Service name through the test DNS server answering from the Endpoints.
 */
import { expect } from 'chai';

import { EvaluatorClient } from '../../src/lib/grpc/client.js';
import { RegistryMetadataSource } from '../../src/lib/pods/cluster/image-metadata.js';
import { RegistryClient } from '../../src/lib/registry/client.js';
import type { RunningServer } from '../../src/lib/serve.js';
import { KubeRestClient } from '../support/k8s/client.js';
import { startTestBed, type TestBed } from '../support/k8s/index.js';
import { pushFunctionPodImages } from '../support/node/function-images.js';
import { RuncRuntime, TestDnsServer } from '../support/node/index.js';
import { RL } from '../support/pods/index.js';
import { TestRegistry } from '../support/registry/registry.js';
import { makeFunctionsDir, serveOptions, startInProcess } from '../support/serve.js';
import { TempDirs } from '../support/tmp.js';
import { PACKAGE_TIMEOUT_MS } from '../wrapper/support/package.js';

type KubeObject = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('function pods under runc: fnr serve + test API server + the runc node', function () {
  this.timeout(180_000);
  const temp = new TempDirs();
  let registry: TestRegistry;
  let node: RuncRuntime;
  let bed: TestBed;
  let dns: TestDnsServer;
  let kube: KubeRestClient;
  let fns: { configPath: string; functionsDir: string };
  let wrapperImage: string;
  let fnImage: string;
  let nsCounter = 0;

  before(async function () {
    this.timeout(PACKAGE_TIMEOUT_MS);
    registry = await TestRegistry.start({ mode: 'none' });
    const images = await pushFunctionPodImages(registry);
    ({ wrapperImage, fnImage } = images);
    console.log(`      wrapper-server + function images built and pushed in ${images.ms} ms`);
    node = await RuncRuntime.create({ backoffMs: 500, maxBackoffMs: 5000, retryMs: 300 });
    bed = await startTestBed({ kubelet: { runtime: node }, namespaces: ['fn-ip', 'fn-svc'] });
    kube = new KubeRestClient({ url: bed.url, token: bed.api.token, ca: bed.api.caPem });
    dns = await TestDnsServer.start(kube);
    fns = await makeFunctionsDir(await temp.make());
  });

  after(async () => {
    await bed?.stop();
    await node?.stop();
    await dns?.stop();
    kube?.close();
    await registry?.stop();
    await temp.cleanup();
    expect(RuncRuntime.liveNetworks()).to.deep.equal([]);
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
        kubeConfig: bed.kubeConfig,
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
      const pods = bed.api.registry.list('pods', namespace).items as KubeObject[];
      expect(pods).to.have.length(1);
      return { pod: pods[0]!, ms };
    } finally {
      client.close();
    }
  };

  it('--pod-address=pod-ip: the inline template runs for real and evaluates a ResourceList', async () => {
    const running = await serve('fn-ip', { podAddress: 'pod-ip' });
    try {
      const { pod, ms } = await evaluate(running, 'fn-ip');
      console.log(`      first call (pod create, wrapper + function image pull and unpack, init copy, runc start, gRPC Ready): ${ms} ms`);
      for (const t of node.images.timings) console.log(`        ${t.image}: skopeo pull ${t.pullMs} ms, unpack ${t.unpackMs} ms`);
      const fnStatus = (pod.status.containerStatuses as KubeObject[]).find((c) => c.name === 'function')!;
      expect(fnStatus.ready).to.equal(true);
      expect(fnStatus.containerID).to.match(/^runc:\/\//);
      expect(pod.status.podIP).to.match(/^198\.1[89]\./);
      expect((pod.status.initContainerStatuses as KubeObject[])[0].state.terminated.reason).to.equal('Completed');
      const fn = (pod.spec.containers as KubeObject[]).find((c) => c.name === 'function')!;
      expect(fn.securityContext).to.deep.include({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false });
      expect(fn.securityContext.capabilities).to.deep.equal({ drop: ['ALL'] });
      const logs = await bed.kubectl(['logs', '-n', 'fn-ip', pod.metadata.name, '-c', 'function']);
      expect(logs.code, logs.stderr).to.equal(0);
      expect(logs.stdout).to.contain('wrapper server is ready');
      // A second call reuses the running pod.
      const again = await evaluate(running, 'fn-ip');
      console.log(`      second call (warm pod): ${again.ms} ms`);
      expect(again.pod.metadata.uid).to.equal(pod.metadata.uid);
    } finally {
      await running.stop();
    }
  });

  it('--pod-address=service: the Service name resolves through the test DNS server (FNR_DNS_SERVER) to the pod', async () => {
    const running = await serve('fn-svc', { podAddress: 'service', dnsServer: dns.address });
    try {
      const { pod } = await evaluate(running, 'fn-svc');
      const name = `${pod.metadata.name}.fn-svc.svc.cluster.local`;
      expect(dns.queries).to.include(name);
      const ep = bed.api.registry.find('endpoints', 'fn-svc', pod.metadata.name) as KubeObject;
      expect(ep.subsets[0].addresses[0].ip).to.equal(pod.status.podIP);
    } finally {
      await running.stop();
    }
  });
});
