/**
 * The connect step of a function pod (src/lib/pods/runtime/connect.ts): the address fnr dials (pod
 * IP, IPv4 or IPv6, or the Service's DNS name, optionally through FNR_DNS_SERVER), the channel a
 * slot gets, and a launched pod's wait for its channel ended by the slot's abort signal. Channels
 * are made in process; no pod exists.
 */
import net from 'node:net'

import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import {PodSlot} from '../../src/lib/pods/model/slot.js'
import {PodConnector, type PodConnectOptions} from '../../src/lib/pods/runtime/connect.js'

const BASE: PodConnectOptions = {addressMode: 'service', namespace: 'fn-ns', clusterDomain: 'cluster.local', maxMessageSize: 1 << 20}

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = net.createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const {port} = server.address() as net.AddressInfo
  await new Promise((resolve) => server.close(resolve))
  return port
}

describe('pod runtime: connecting to a function pod', () => {
  const slots: PodSlot[] = []
  after(() => {
    for (const s of slots) s.client?.close()
  })

  it('dials the pod IP on the wrapper port (IPv6 in brackets), or the Service name in the pod namespace', () => {
    const byIp = new PodConnector({...BASE, addressMode: 'pod-ip'})
    expect(byIp.addressMode).to.equal('pod-ip')
    expect(byIp.addressOf('fn-v1-1-abc', '10.1.2.3')).to.equal('10.1.2.3:9446')
    expect(byIp.addressOf('fn-v1-1-abc', 'fd00::7')).to.equal('[fd00::7]:9446')
    const byName = new PodConnector(BASE)
    expect(byName.addressMode).to.equal('service')
    expect(byName.addressOf('fn-v1-1-abc', '10.1.2.3')).to.equal('fn-v1-1-abc.fn-ns.svc.cluster.local:9446')
    expect(new PodConnector({...BASE, clusterDomain: 'example.internal'}).addressOf('p', '10.1.2.3')).to.equal('p.fn-ns.svc.example.internal:9446')
  })

  it('resolves the Service name through FNR_DNS_SERVER when one is given (default port 53)', () => {
    expect(new PodConnector({...BASE, dnsServer: '10.96.0.10'}).addressOf('p', '10.1.2.3')).to.equal('fnr-dns://10.96.0.10:53/p.fn-ns.svc.cluster.local:9446')
    expect(new PodConnector({...BASE, dnsServer: '[::1]:5353'}).addressOf('p', '10.1.2.3')).to.equal('fnr-dns://[::1]:5353/p.fn-ns.svc.cluster.local:9446')
    // the pod IP never goes through it
    expect(new PodConnector({...BASE, addressMode: 'pod-ip', dnsServer: '10.96.0.10'}).addressOf('p', '10.1.2.3')).to.equal('10.1.2.3:9446')
  })

  it('attach gives the slot its address and a channel to it', () => {
    const slot = new PodSlot('example.com/fn:v1', 'fn-v1-1-abc', 'v1', 0)
    slots.push(slot)
    new PodConnector({...BASE, addressMode: 'pod-ip'}).attach(slot, '127.0.0.1')
    expect(slot.address).to.equal('127.0.0.1:9446')
    expect(slot.client).to.not.equal(undefined)
  })

  it('a launched pod abandoned while connecting is Unavailable, with the slot\'s reason', async () => {
    const port = await closedPort()
    const connector = new PodConnector({...BASE, addressMode: 'pod-ip'})
    connector.addressOf = () => `127.0.0.1:${port}`
    const slot = new PodSlot('example.com/fn:v1', 'fn-v1-1-abc', 'v1', 0)
    slots.push(slot)
    slot.goneReason = 'evicted by the test'
    const abort = new AbortController()
    const pending = connector.connectLaunched(slot, '127.0.0.1', {deadline: Date.now() + 1000, deadlineName: 'the pod-ready timeout (1 s)', signal: abort.signal}).catch((e: unknown) => e)
    abort.abort()
    const err = (await pending) as FnrError
    expect(err.kind).to.equal('Unavailable')
    expect(err.message).to.equal('function pod fn-v1-1-abc for image "example.com/fn:v1" was abandoned (evicted by the test)')
  })

  it('a launched pod whose channel never connects fails at the pod-ready deadline with that deadline\'s message, every time', async () => {
    const port = await closedPort()
    const connector = new PodConnector({...BASE, addressMode: 'pod-ip'})
    connector.addressOf = () => `127.0.0.1:${port}`
    // grpc-js's own "failed to connect before the deadline" used to win this race in about one run in four.
    const errors = await Promise.all(Array.from({length: 8}, async (_, i) => {
      const slot = new PodSlot('example.com/fn:v1', `fn-v1-1-ab${i}`, 'v1', 0)
      slots.push(slot)
      return connector.connectLaunched(slot, '127.0.0.1', {deadline: Date.now() + 300, deadlineName: 'the pod-ready timeout (0.3 s)', signal: new AbortController().signal}).then(() => undefined, (e: unknown) => e as FnrError)
    }))
    for (const [i, err] of errors.entries()) {
      expect(err?.kind, String(i)).to.equal('DeadlineExceeded')
      expect(err?.message).to.equal(`function pod fn-v1-1-ab${i} for image "example.com/fn:v1" was not ready within the pod-ready timeout (0.3 s) (connecting to 127.0.0.1:${port})`)
    }
  })
})
