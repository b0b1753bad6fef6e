/**
 * The test DNS server (answers <svc>.<ns>.svc.<domain> from the API's endpoints) queried with node:dns, and fnr's
 * FNR_DNS_SERVER option: its parsing and the config error for a bad value.
 */
import { expect } from 'chai';
import { promises as dns } from 'node:dns';

import { FnrError } from '../../src/lib/errors.js';
import { parseDnsServer } from '../../src/lib/grpc/dns-server.js';
import { KubeRestClient } from '../support/k8s/client.js';
import { startTestBed, type TestBed } from '../support/k8s/index.js';
import { TestDnsServer } from '../support/node/dns.js';
import { makeFunctionsDir, serveOptions, startInProcess } from '../support/serve.js';
import { TempDirs } from '../support/tmp.js';

describe('test DNS server and FNR_DNS_SERVER', function () {
  this.timeout(30_000);
  const temp = new TempDirs();
  let bed: TestBed;
  let kube: KubeRestClient;
  let server: TestDnsServer;
  let resolver: dns.Resolver;

  before(async () => {
    bed = await startTestBed({ kubelet: false, namespaces: ['fns'] });
    kube = new KubeRestClient({ url: bed.url, token: bed.api.token, ca: bed.api.caPem });
    server = await TestDnsServer.start(kube, { domain: 'example.test' });
    resolver = new dns.Resolver({ timeout: 2000, tries: 1 });
    resolver.setServers([server.address]);
    bed.api.registry.create('endpoints', 'fns', {
      apiVersion: 'v1',
      kind: 'Endpoints',
      metadata: { name: 'fn-a', namespace: 'fns' },
      subsets: [{ addresses: [{ ip: '198.18.0.2' }, { ip: '198.18.0.6' }], notReadyAddresses: [{ ip: '198.18.0.10' }], ports: [{ port: 9446 }] }],
    });
    bed.api.registry.create('endpoints', 'fns', { apiVersion: 'v1', kind: 'Endpoints', metadata: { name: 'fn-empty', namespace: 'fns' } });
  });

  after(async () => {
    await server?.stop();
    kube?.close();
    await bed?.stop();
    await temp.cleanup();
  });

  it('answers A queries with the ready endpoint addresses, NXDOMAIN for unknown names', async () => {
    expect((await resolver.resolve4('fn-a.fns.svc.example.test')).sort()).to.deep.equal(['198.18.0.2', '198.18.0.6']);
    expect(await resolver.resolve4('FN-A.fns.svc.example.test')).to.have.length(2);
    const empty = await resolver.resolve4('fn-empty.fns.svc.example.test').catch((e: NodeJS.ErrnoException) => e.code);
    expect(empty).to.equal('ENODATA');
    for (const name of ['missing.fns.svc.example.test', 'fn-a.fns.svc.cluster.local', 'example.test']) {
      const code = await resolver.resolve4(name).catch((e: NodeJS.ErrnoException) => e.code);
      expect(code, name).to.equal('ENOTFOUND');
    }
    expect(server.queries).to.include('fn-a.fns.svc.example.test');
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
      pod: { ...base.pod, namespace: 'fns', wrapperServerImage: 'example.com/w:v1', kubeConfig: bed.kubeConfig, dnsServer: 'not-an-ip', metadata: { describe: async () => ({ command: ['/f'] }) } },
    }).catch((e: unknown) => e);
    expect(err).to.be.instanceOf(FnrError);
    expect((err as FnrError).kind).to.equal('Config');
    expect((err as FnrError).message).to.contain('FNR_DNS_SERVER').and.contain('not-an-ip');
  });
});
