// client-node 2 built a new undici Agent per request; shareConnections gives one per TLS identity
// with short-lived idle sockets (src/lib/k8s/dispatcher.ts).
import {expect} from 'chai'

import type {KubeConfig} from '@kubernetes/client-node'

import {IDLE_SOCKET_MS, shareConnections} from '../../src/lib/k8s/dispatcher.js'

class FakeAgent {
  constructor(readonly options: {connect?: Record<string, unknown>; keepAliveTimeout?: number; keepAliveMaxTimeout?: number}) {}
}

/** A KubeConfig as far as dispatchers go: client-node 2's option mapping, reduced. */
function fakeKubeConfig(): {kc: KubeConfig; own: number} {
  const state = {own: 0}
  const kc = {
    createDispatcherOptions(cluster: {server?: string; proxyUrl?: string} | null, agentOptions: {ca?: Buffer}) {
      if (cluster?.proxyUrl) return {type: 'proxy'}
      return agentOptions.ca ? {type: 'agent', connect: {ca: agentOptions.ca, keepAlive: true}} : {type: 'none'}
    },
    createDispatcher() {
      state.own++
      return 'client-node-own'
    },
  }
  return {kc: kc as unknown as KubeConfig, get own() {
    return state.own
  }}
}

describe('k8s dispatcher: connections shared per identity', () => {
  it('one Agent per server and TLS settings, reused; idle sockets close after IDLE_SOCKET_MS; proxies keep client-node\'s', () => {
    const f = fakeKubeConfig()
    shareConnections(f.kc, FakeAgent)
    shareConnections(f.kc, FakeAgent) // idempotent
    const kc = f.kc as unknown as {createDispatcher(cluster: unknown, options: unknown): unknown}
    const a = kc.createDispatcher({server: 'https://a:6443'}, {ca: Buffer.from('CA1')})
    // the CA read again for the next request: a new Buffer, the same identity
    expect(kc.createDispatcher({server: 'https://a:6443'}, {ca: Buffer.from('CA1')})).to.equal(a)
    expect(kc.createDispatcher({server: 'https://a:6443'}, {ca: Buffer.from('CA2')})).to.not.equal(a)
    expect(kc.createDispatcher({server: 'https://b:6443'}, {ca: Buffer.from('CA1')})).to.not.equal(a)
    expect(a).to.be.instanceOf(FakeAgent)
    expect((a as FakeAgent).options).to.deep.include({keepAliveTimeout: IDLE_SOCKET_MS, keepAliveMaxTimeout: IDLE_SOCKET_MS})
    // no TLS settings: a shared Agent too, instead of fetch's global one with the server's keep-alive hint
    const plain = kc.createDispatcher({server: 'http://c:8080'}, {})
    expect(plain).to.be.instanceOf(FakeAgent)
    expect(kc.createDispatcher({server: 'http://c:8080'}, {})).to.equal(plain)
    expect(f.own).to.equal(0)
    expect(kc.createDispatcher({server: 'https://a:6443', proxyUrl: 'http://proxy:3128'}, {})).to.equal('client-node-own')
    expect(f.own).to.equal(1)
  })
})
