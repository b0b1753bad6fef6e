/**
 * A running runner adopts pods of `fnr pods warm` (owner fnr-pods-warm) at its GC pass when it
 * could not when the pod became ready (the image was at its pod limit then). The pod watch path
 * and the CLI end to end are in test/operator/pods-warm.test.ts.
 */
import {randomUUID} from 'node:crypto'

import {expect} from 'chai'
import type {V1Pod} from '@kubernetes/client-node'

import {podReadiness} from '../../src/lib/pods/cluster/manager.js'
import {ANNOTATION_TEMPLATE_VERSION, LABEL_OWNER, WARM_OWNER, functionPodAnnotations, functionPodLabels} from '../../src/lib/pods/model/naming.js'
import {waitForClusterBinaries} from '../support/cluster/shared.js'
import {createdThroughProxy, listPods, startClusterRuntime, useClusterPodBed, type ClusterPodBed} from '../support/pods/cluster-bed.js'
import {RL, image, until, closeAll, type RuntimeHandle} from '../support/pods/index.js'

describe('pod runtime: adopting warmed pods at a GC pass', function () {
  this.timeout(120_000)
  waitForClusterBinaries()
  let pb: ClusterPodBed
  let ns: string
  const handles: RuntimeHandle[] = []

  useClusterPodBed({
    bed: (bed) => (pb = bed),
    namespace: (name) => (ns = name),
    cleanup: () => closeAll(handles),
  })

  it('a warmed pod the runner could not take (image at its pod limit) is adopted at the first GC pass after room is made, and used without creating a pod', async () => {
    const h = await startClusterRuntime(pb, {namespace: ns, owner: 'runner-g', scanIntervalMs: 200, maxParallelPods: 1})
    handles.push(h)
    await h.evaluator.evaluate({image: image('cat'), resourceList: RL})
    const [own] = h.runtime.cache.snapshot()
    // A pod as `fnr pods warm` makes it: the runner's pod spec, warm's labels and annotations.
    const source = (await listPods(pb, ns)).find((p) => p.metadata!.name === own!.name)!
    const name = `warmed-${own!.name.slice(-5)}`
    const warmed: V1Pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name,
        labels: functionPodLabels(name, image('cat'), WARM_OWNER),
        annotations: functionPodAnnotations({templateVersion: source.metadata!.annotations![ANNOTATION_TEMPLATE_VERSION]!, image: image('cat'), owner: WARM_OWNER, now: Date.now(), ttlMs: 1800_000, creationId: randomUUID()}),
      },
      spec: structuredClone(source.spec),
    }
    await pb.admin.create(`/api/v1/namespaces/${ns}/pods`, warmed)
    await until(async () => {
      const p = (await listPods(pb, ns)).find((x) => x.metadata!.name === name)
      return p && podReadiness(p, image('cat')).state === 'ready'
    }, 'the warmed pod ready')
    // At its pod limit the runner leaves it alone, pass after pass.
    const runs = h.runtime.gc.runs
    await until(() => h.runtime.gc.runs >= runs + 3, 'GC passes')
    expect(h.runtime.cache.snapshot().map((s) => s.name)).to.deep.equal([own!.name])
    expect((await listPods(pb, ns)).find((p) => p.metadata!.name === name)!.metadata!.labels![LABEL_OWNER]).to.equal(WARM_OWNER)
    // Room: the runner's own pod goes; the next pass adopts the warmed one.
    h.runtime.cache.evict(h.runtime.cache.slotFor(own!.name)!, 'test: make room')
    await until(() => h.runtime.cache.snapshot().some((s) => s.name === name), 'the warmed pod adopted at a GC pass')
    await until(async () => (await listPods(pb, ns)).find((p) => p.metadata!.name === name)?.metadata!.labels![LABEL_OWNER] === 'runner-g', 'ownership taken')
    const created = createdThroughProxy(pb, ns, 'pods')
    const out = await h.evaluator.evaluate({image: image('cat'), resourceList: RL})
    expect(Buffer.from(out.resourceList).toString()).to.equal(RL.toString())
    expect(createdThroughProxy(pb, ns, 'pods')).to.equal(created)
  })
})
