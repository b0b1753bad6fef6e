/**
 * The silence a watch tolerates (src/lib/k8s/watch.ts newWatch): client-node's Watch ends a watch after 30 s
 * without a byte, while kube-apiserver writes to a quiet watch only when it sends a BOOKMARK (about once a
 * minute), so every idle watch of the pod runtime failed and relisted every 30 s. Against an in-process HTTP
 * server that answers a watch and then says nothing: the limit newWatch sets is the one that ends it.
 */
import {KubeConfig, Watch} from '@kubernetes/client-node'
import {expect} from 'chai'
import http from 'node:http'
import type {AddressInfo} from 'node:net'

import {newWatch, WATCH_INACTIVITY_MS} from '../../src/lib/k8s/watch.js'

describe('k8s watch: the silence limit is longer than kube-apiserver\'s bookmark interval', () => {
  let server: http.Server
  let kubeConfig: KubeConfig
  const open = new Set<http.ServerResponse>()

  before(async () => {
    server = http.createServer((_req, res) => {
      // a watch answered, then silence (as a quiet watch between two bookmarks)
      res.writeHead(200, {'content-type': 'application/json'})
      res.flushHeaders()
      open.add(res)
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    kubeConfig = new KubeConfig()
    kubeConfig.loadFromOptions({
      clusters: [{name: 'c', server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true}],
      users: [{name: 'u', token: 't'}],
      contexts: [{name: 'x', cluster: 'c', user: 'u'}],
      currentContext: 'x',
    })
  })
  after(async () => {
    for (const r of open) r.destroy()
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  })

  it('client-node\'s Watch still keeps its limit where newWatch sets it (fails on an upgrade that moves it)', () => {
    const plain = new Watch(kubeConfig) as unknown as {requestTimeoutMs: unknown}
    expect(plain.requestTimeoutMs).to.equal(30_000)
    const ours = newWatch({Watch}, kubeConfig) as unknown as {requestTimeoutMs: unknown}
    expect(ours.requestTimeoutMs).to.equal(WATCH_INACTIVITY_MS)
    // kube-apiserver's bookmarks come about once a minute; fnr's watches ask for 300 s
    expect(WATCH_INACTIVITY_MS).to.be.greaterThan(90_000).and.lessThan(300_000)
  })

  it('a silent watch ends at the limit newWatch gives it, not before', async function () {
    this.timeout(10_000)
    const ended = (ms: number): Promise<{err: unknown; after: number}> =>
      new Promise((resolve, reject) => {
        const t = Date.now()
        newWatch({Watch}, kubeConfig, ms)
          .watch('/api/v1/pods', {watch: true}, () => undefined, (err) => resolve({err, after: Date.now() - t}))
          .catch(reject)
      })
    const short = await ended(300)
    expect((short.err as Error | undefined)?.name).to.equal('TimeoutError')
    expect(short.after).to.be.at.least(250)
    // a longer limit: still open when the short one has long ended
    const long = ended(60_000)
    const first = await Promise.race([long.then(() => 'ended'), new Promise((r) => setTimeout(() => r('open'), 1500))])
    expect(first).to.equal('open')
    for (const r of open) r.destroy()
    await long
  })
})
