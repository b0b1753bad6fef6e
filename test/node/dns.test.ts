/**
 * The test DNS server (answers <svc>.<ns>.svc.<domain> from the API's endpoints) queried with node:dns, and fnr's
 * FNR_DNS_SERVER option: its parsing and the config error for a bad value. The endpoints are Endpoints objects in a
 * namespace of the shared control plane (no Service: kube-controller-manager mirrors none into EndpointSlices).
 */
import * as grpc from '@grpc/grpc-js';
import { expect } from 'chai';
import { promises as dns } from 'node:dns';
import { networkInterfaces } from 'node:os';

import { FnrError } from '../../src/lib/errors.js';
import { dnsServerTarget, parseDnsServer } from '../../src/lib/grpc/dns-server.js';
import type { ControlPlane } from '../support/cluster/controlplane.js';
import { adminClient, namespace, sharedControlPlane, waitForClusterBinaries } from '../support/cluster/shared.js';
import type { KubeRestClient } from '../support/k8s/client.js';
import { TestDnsServer } from '../support/node/dns.js';
import { makeFunctionsDir, serveOptions, startInProcess } from '../support/serve.js';
import { TempDirs } from '../support/tmp.js';

/**
 * A non-loopback IPv4 address of this machine: kube-apiserver refuses loopback (and link-local) addresses in
 * Endpoints, and a server bound to this one is still reachable from the test process.
 */
function hostAddress(): string {
  for (const addrs of Object.values(networkInterfaces())) {
    for (const a of addrs ?? []) if (a.family === 'IPv4' && !a.internal && !a.address.startsWith('169.254.')) return a.address;
  }
  throw new Error('no non-loopback IPv4 address on this machine (the fn-late case needs one for its Endpoints)');
}

describe('test DNS server and FNR_DNS_SERVER', function () {
  this.timeout(30_000);
  waitForClusterBinaries();
  const temp = new TempDirs();
  let cp: ControlPlane;
  let ns: { name: string; remove: () => Promise<void> };
  let kube: KubeRestClient;
  let server: TestDnsServer;
  let resolver: dns.Resolver;
  const endpoints = (): string => `/api/v1/namespaces/${ns.name}/endpoints`;

  before(async () => {
    cp = await sharedControlPlane();
    ns = await namespace(cp, 'fns');
    kube = adminClient(cp);
    server = await TestDnsServer.start(kube, { domain: 'example.test' });
    resolver = new dns.Resolver({ timeout: 2000, tries: 1 });
    resolver.setServers([server.address]);
    await kube.create(endpoints(), {
      apiVersion: 'v1',
      kind: 'Endpoints',
      metadata: { name: 'fn-a' },
      subsets: [{ addresses: [{ ip: '198.18.0.2' }, { ip: '198.18.0.6' }], notReadyAddresses: [{ ip: '198.18.0.10' }], ports: [{ port: 9446 }] }],
    });
    await kube.create(endpoints(), { apiVersion: 'v1', kind: 'Endpoints', metadata: { name: 'fn-empty' } });
  });

  after(async () => {
    await server?.stop();
    await ns?.remove();
    kube?.close();
    await temp.cleanup();
  });

  it('answers A queries with the ready endpoint addresses, NXDOMAIN for unknown names', async () => {
    expect((await resolver.resolve4(`fn-a.${ns.name}.svc.example.test`)).sort()).to.deep.equal(['198.18.0.2', '198.18.0.6']);
    expect(await resolver.resolve4(`FN-A.${ns.name.toUpperCase()}.svc.example.test`)).to.have.length(2);
    const empty = await resolver.resolve4(`fn-empty.${ns.name}.svc.example.test`).catch((e: NodeJS.ErrnoException) => e.code);
    expect(empty).to.equal('ENODATA');
    for (const name of [`missing.${ns.name}.svc.example.test`, `fn-a.${ns.name}.svc.cluster.local`, 'example.test']) {
      const code = await resolver.resolve4(name).catch((e: NodeJS.ErrnoException) => e.code);
      expect(code, name).to.equal('ENOTFOUND');
    }
    expect(server.queries).to.include(`fn-a.${ns.name}.svc.example.test`);
  });

  it('parses FNR_DNS_SERVER values and rejects bad ones with a clear config error at start', async () => {
    expect(parseDnsServer('127.0.0.1')).to.equal('127.0.0.1:53');
    expect(parseDnsServer(' 10.0.0.1:5353 ')).to.equal('10.0.0.1:5353');
    expect(parseDnsServer('[::1]:53')).to.equal('[::1]:53');
    for (const bad of ['', 'dns.example', '1.2.3.4:0', '1.2.3.4:99999', 'http://1.2.3.4']) expect(() => parseDnsServer(bad), bad).to.throw(/DNS server must be an IP address/);
    const fns = await makeFunctionsDir(await temp.make());
    const base = serveOptions({ ...fns, disableRuntimes: 'exec' });
    const err = await startInProcess({
      ...base,
      pod: { ...base.pod, namespace: ns.name, wrapperServerImage: 'example.com/w:v1', kubeconfig: cp.kubeconfigPath, dnsServer: 'not-an-ip', metadata: { describe: async () => ({ command: ['/f'] }) } },
    }).catch((e: unknown) => e);
    expect(err).to.be.instanceOf(FnrError);
    expect((err as FnrError).kind).to.equal('Config');
    expect((err as FnrError).message).to.contain('FNR_DNS_SERVER').and.contain('not-an-ip');
  });

  it('a name without ready endpoints yet is resolved again until it has some: the channel connects once they appear (no 60 s stall)', async () => {
    // Found on the real control plane (test/cluster/function-pods.test.ts): fnr asked before the EndpointSlice had
    // the pod's address, got an empty answer, and the channel never asked the DNS server again.
    const ip = hostAddress();
    const target = new grpc.Server();
    const port = await new Promise<number>((resolve, reject) => target.bindAsync(`${ip}:0`, grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
    const created = await kube.create(endpoints(), { apiVersion: 'v1', kind: 'Endpoints', metadata: { name: 'fn-late' } });
    const client = new grpc.Client(dnsServerTarget(server.address, `fn-late.${ns.name}.svc.example.test:${port}`), grpc.credentials.createInsecure(), {
      'grpc.initial_reconnect_backoff_ms': 100,
      'grpc.max_reconnect_backoff_ms': 2000,
    });
    try {
      const t = Date.now();
      const ready = new Promise<void>((resolve, reject) => client.waitForReady(Date.now() + 20_000, (e) => (e ? reject(e) : resolve())));
      await new Promise((r) => setTimeout(r, 1500));
      const before = server.queries.filter((q) => q.startsWith('fn-late.')).length;
      expect(before, 'asked while there were no endpoints').to.be.greaterThan(0);
      await kube.replace(`${endpoints()}/fn-late`, { ...created, subsets: [{ addresses: [{ ip }], ports: [{ port }] }] });
      await ready;
      console.log(`      connected ${Date.now() - t} ms after the first try (endpoints added at 1.5 s); ${server.queries.filter((q) => q.startsWith('fn-late.')).length} queries`);
    } finally {
      client.close();
      target.forceShutdown();
    }
  });
});
