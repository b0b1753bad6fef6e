/**
 * ResourceWatcher (src/lib/k8s/watch.ts) over client-node 2.x's Watch, which ends a watch that has
 * received nothing for 30 s with a TimeoutError: a quiet watch resumes from the last
 * resourceVersion, without a relist and without a warning; any other failure still relists.
 * client-node's Watch is replaced by a recording fake (the timeout itself is client-node's).
 */
import {expect} from 'chai'

import type {ClientNode} from '../../src/lib/k8s/client.js'
import {ResourceWatcher, type KubeObjectLike} from '../../src/lib/k8s/watch.js'
import {silentLogger} from '../../src/lib/telemetry/log.js'

type Callback = (phase: string, object: unknown) => void
type Done = (err: unknown) => void

interface WatchCall {
  query: Record<string, string | number | boolean | undefined>
  callback: Callback
  done: Done
}

function fakeClientNode(calls: WatchCall[]): ClientNode {
  class FakeWatch {
    watch(_path: string, query: WatchCall['query'], callback: Callback, done: Done): Promise<AbortController> {
      calls.push({query, callback, done})
      return Promise.resolve(new AbortController())
    }
  }
  return {Watch: FakeWatch} as unknown as ClientNode
}

const until = async (what: string, check: () => boolean): Promise<void> => {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 10))
  expect(check(), what).to.equal(true)
}

describe('ResourceWatcher on client-node 2.x', () => {
  const setup = (): {watcher: ResourceWatcher<KubeObjectLike>; calls: WatchCall[]; lists: () => number; warnings: string[]} => {
    const calls: WatchCall[] = []
    const warnings: string[] = []
    let lists = 0
    const watcher = new ResourceWatcher<KubeObjectLike>({
      k8s: fakeClientNode(calls),
      kubeConfig: {} as never,
      path: '/api/v1/namespaces/ns/pods',
      description: 'pods of ns',
      retryMs: 10,
      logger: {...silentLogger, warn: (msg) => void warnings.push(msg)},
      list: () => {
        lists++
        return Promise.resolve({items: [{metadata: {name: 'a', resourceVersion: '3'}}], metadata: {resourceVersion: '4'}})
      },
    })
    return {watcher, calls, lists: () => lists, warnings}
  }

  it("resumes a watch that client-node timed out from its last resourceVersion: no relist, no warning", async () => {
    const {watcher, calls, lists, warnings} = setup()
    await watcher.start()
    try {
      await until('the first watch', () => calls.length === 1)
      expect(calls[0]!.query.resourceVersion).to.equal('4')
      calls[0]!.callback('MODIFIED', {metadata: {name: 'a', resourceVersion: '7'}})
      calls[0]!.done(new DOMException('The operation was aborted due to timeout', 'TimeoutError'))
      await until('the resumed watch', () => calls.length === 2)
      expect(calls[1]!.query.resourceVersion).to.equal('7')
      expect(lists()).to.equal(1)
      expect(warnings).to.deep.equal([])
      expect(watcher.get('a')?.metadata?.resourceVersion).to.equal('7')
    } finally {
      watcher.stop()
    }
  })

  it('relists, with a warning, after any other watch failure', async () => {
    const {watcher, calls, lists, warnings} = setup()
    await watcher.start()
    try {
      await until('the first watch', () => calls.length === 1)
      calls[0]!.done(Object.assign(new TypeError('fetch failed'), {cause: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), {code: 'ECONNREFUSED'})}))
      await until('the watch after the relist', () => calls.length === 2)
      expect(lists()).to.equal(2)
      expect(warnings).to.deep.equal(['watch failed; relisting'])
    } finally {
      watcher.stop()
    }
  })
})
