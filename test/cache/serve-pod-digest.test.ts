import {expect} from 'chai'
import {readFile} from 'node:fs/promises'

import {DEFAULT_RESPONSE_CACHE} from '../../src/lib/cache/response-cache.js'
import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {RegistryMetadataSource} from '../../src/lib/pods/cluster/image-metadata.js'
import {ANNOTATION_IMAGE_DIGEST} from '../../src/lib/pods/model/template.js'
import {RegistryClient} from '../../src/lib/registry/client.js'
import {createMetrics, type PrometheusMetrics} from '../../src/lib/telemetry/metrics.js'
import type {RunningServer} from '../../src/lib/serve.js'
import {waitForClusterBinaries} from '../support/cluster/shared.js'
import {listPods, startClusterPodBed, wrapped, type ClusterPodBed} from '../support/pods/cluster-bed.js'
import {RL, WRAPPER_IMAGE, until} from '../support/pods/index.js'
import {pushImage} from '../support/registry/fixtures.js'
import {TestRegistry} from '../support/registry/registry.js'
import {freePort} from '../support/registry/tools.js'
import {makeFunctionsDir, serveOptions, startInProcess} from '../support/serve.js'
import {TempDirs, writeExecutable} from '../support/tmp.js'
import {parseExposition, scrape} from '../metrics/prom-text.js'

describe('fnr serve response cache with the pod runtime: keyed by the digest, never the tag (real registry, skopeo, the real control plane)', function () {
  this.timeout(120_000)
  waitForClusterBinaries()
  const temp = new TempDirs()
  let registry: TestRegistry
  let pb: ClusterPodBed
  let running: RunningServer | undefined
  let client: EvaluatorClient | undefined
  let metricsPort: number
  /** The metrics of the registry client this test hands the server (its own, not the server's). */
  let registryMetrics: PrometheusMetrics
  let ns: string
  let repo: string
  let img: string
  let v1: string
  let v2: string
  const scripts: Record<string, string> = {}

  /** How many times the function of version `v` ran. */
  const runs = async (v: string): Promise<number> => (await readFile(`${scripts[v]}.count`, 'utf8').catch(() => '')).split('\n').filter((l) => l !== '').length

  before(async () => {
    registry = await TestRegistry.start({mode: 'none'})
    repo = `${registry.host}/fn/counted`
    img = `${repo}:v1`
    v1 = (await pushImage(registry, 'fn/counted:v1', {entrypoint: ['/bin/fn'], files: {'bin/fn': 'version 1\n'}})).manifest.digest
    pb = await startClusterPodBed()
    // Two contents, told apart by what they write to stderr. The kubelet knows them only by
    // digest, as a node that pulls `repo@digest` does: it runs exactly the content the runner resolved.
    // (The node's wrapper-server path is mapped per image on the shared control plane's node.)
    for (const v of ['v1', 'v2']) scripts[v] = await writeExecutable(`${pb.dir}/counted-${v}`, `#!/bin/sh\necho run >> "$0.count"\necho "running ${v}" >&2\nexec cat\n`)
    pb.kubelet.setImage(`${repo}@${v1}`, wrapped({'/bin/fn': scripts.v1!}))
    // Re-check the tag on every lookup (the default is once a minute), so the move is seen at once.
    registryMetrics = await createMetrics({defaultMetrics: false})
    const registryClient = new RegistryClient({insecureRegistries: [registry.host], retryDelayMs: 5, revalidateAfterMs: 0, telemetry: {metrics: registryMetrics}})
    const fns = await makeFunctionsDir(await temp.make())
    metricsPort = await freePort()
    const base = serveOptions({...fns, disableRuntimes: 'exec'})
    running = await startInProcess({
      ...base,
      metricsPort,
      responseCache: {...DEFAULT_RESPONSE_CACHE, ttlMs: 10 * 60_000},
      pod: {
        ...base.pod,
        namespace: (ns = await pb.namespace()),
        wrapperServerImage: WRAPPER_IMAGE,
        podAddress: 'pod-ip',
        metadata: new RegistryMetadataSource(registryClient),
        kubeconfig: pb.kubeconfigPath,
        owner: 'cache-test',
      },
    })
    client = new EvaluatorClient(`127.0.0.1:${running.port}`)
  })
  after(async () => {
    client?.close()
    await running?.stop()
    await pb?.stop()
    await registry?.stop()
    await temp.cleanup()
  })

  const podsOf = async (digest: string) => (await listPods(pb, ns)).filter((p) => p.metadata?.annotations?.[ANNOTATION_IMAGE_DIGEST] === digest)

  it('pins the pod to the digest, hits for the same digest and input; once the tag moves, the old pod is retired and the new content answers and is cached', async () => {
    const first = await client!.evaluateRaw(img, RL, {deadline: Date.now() + 60_000})
    expect(first.log.toString()).to.equal('running v1\n')
    const second = await client!.evaluateRaw(img, RL, {deadline: Date.now() + 60_000})
    expect(await runs('v1')).to.equal(1)
    expect(second.resourceList.equals(first.resourceList)).to.equal(true)
    expect(second.log.equals(first.log)).to.equal(true)
    expect(second.trailers.getMap()).to.deep.equal(first.trailers.getMap())
    expect(second.trailers.get('fnr-evaluator')).to.deep.equal(['pod'])
    // The pod runs repo@digest (--pin-image-digests=auto: the response cache is on) and records the digest.
    const [pod1] = await podsOf(v1)
    expect(pod1, 'a pod annotated with the v1 digest').to.not.equal(undefined)
    expect(pod1!.spec!.containers.find((c) => c.name === 'function')!.image).to.equal(`${repo}@${v1}`)

    // Move the tag: same name, another content (another digest).
    v2 = (await pushImage(registry, 'fn/counted:v1', {entrypoint: ['/bin/fn'], files: {'bin/fn': 'version 2\n'}})).manifest.digest
    expect(v2).to.not.equal(v1)
    pb.kubelet.setImage(`${repo}@${v2}`, wrapped({'/bin/fn': scripts.v2!}))
    const third = await client!.evaluateRaw(img, RL, {deadline: Date.now() + 60_000})
    expect(third.log.toString()).to.equal('running v2\n')
    const fourth = await client!.evaluateRaw(img, RL, {deadline: Date.now() + 60_000})
    expect(fourth.log.toString()).to.equal('running v2\n')
    expect([await runs('v1'), await runs('v2')]).to.deep.equal([1, 1])
    // The v1 pod was retired (idle: deleted at once); the image's pod is now the v2 one.
    await until(async () => (await podsOf(v1)).length === 0, 'the v1 pod deleted')
    expect((await podsOf(v2)).map((p) => p.spec!.containers.find((c) => c.name === 'function')!.image)).to.deep.equal([`${repo}@${v2}`])

    // By digest reference: the registry client's metadata cache answers without asking the registry again.
    const byDigest = `${repo}@${v2}`
    expect((await client!.evaluateRaw(byDigest, RL, {deadline: Date.now() + 60_000})).log.toString()).to.equal('running v2\n')
    expect((await client!.evaluateRaw(byDigest, RL, {deadline: Date.now() + 60_000})).log.toString()).to.equal('running v2\n')
    expect(await runs('v2')).to.equal(2)

    const m = await scrape(metricsPort)
    expect(m.value('fnr_response_cache_lookups_total', {result: 'hit'})).to.equal(3)
    expect(m.value('fnr_response_cache_lookups_total', {result: 'miss', reason: 'absent'})).to.equal(2)
    expect(m.value('fnr_response_cache_lookups_total', {result: 'miss', reason: 'image-changed'})).to.equal(1)
    expect(m.value('fnr_response_cache_skipped_total', {reason: 'digest-mismatch'})).to.equal(0)
    expect(m.value('fnr_evaluations_total', {runtime: 'cache', image: img, code: 'OK'})).to.equal(2)
    expect(m.value('fnr_evaluations_total', {runtime: 'pod', image: img, code: 'OK'})).to.equal(2)
    // The registry client's calls and its metadata cache (in the telemetry it was built with).
    const r = parseExposition((await registryMetrics.exposition()).body)
    expect(r.value('fnr_registry_requests_total', {method: 'GET', status: '200'})).to.be.greaterThan(0)
    expect(r.value('fnr_registry_requests_total', {method: 'HEAD', status: '200'})).to.be.greaterThan(0)
    expect(r.value('fnr_registry_metadata_lookups_total', {result: 'miss'})).to.be.at.least(1)
    expect(r.value('fnr_registry_metadata_lookups_total', {result: 'revalidated'})).to.be.at.least(3)
    expect(r.value('fnr_registry_metadata_lookups_total', {result: 'hit'})).to.be.at.least(2)
  })
})
