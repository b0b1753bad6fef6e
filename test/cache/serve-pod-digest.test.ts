import {expect} from 'chai'
import {readFile} from 'node:fs/promises'

import {DEFAULT_RESPONSE_CACHE} from '../../src/lib/cache/response-cache.js'
import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {RegistryMetadataSource} from '../../src/lib/pods/metadata.js'
import {RegistryClient} from '../../src/lib/registry/client.js'
import type {RunningServer} from '../../src/lib/serve.js'
import {RL, WRAPPER_IMAGE, startPodBed, type PodBed} from '../support/pods/index.js'
import {pushImage} from '../support/registry/fixtures.js'
import {TestRegistry} from '../support/registry/registry.js'
import {freePort} from '../support/registry/tools.js'
import {makeFunctionsDir, serveOptions, startInProcess} from '../support/serve.js'
import {TempDirs, writeExecutable} from '../support/tmp.js'
import {scrape} from '../metrics/prom-text.js'

describe('fnr serve response cache with the pod runtime: keyed by the digest, never the tag (real registry, skopeo)', function () {
  this.timeout(120_000)
  const temp = new TempDirs()
  let registry: TestRegistry
  let pb: PodBed
  let running: RunningServer | undefined
  let client: EvaluatorClient | undefined
  let metricsPort: number
  let fnFile: string
  let img: string

  const runs = async (): Promise<number> => (await readFile(`${fnFile}.count`, 'utf8').catch(() => '')).split('\n').filter((l) => l !== '').length

  before(async () => {
    registry = await TestRegistry.start({mode: 'none'})
    img = `${registry.host}/fn/counted:v1`
    await pushImage(registry, 'fn/counted:v1', {entrypoint: ['/bin/fn'], files: {'bin/fn': 'version 1\n'}})
    pb = await startPodBed()
    fnFile = await writeExecutable(`${pb.dir}/counted-fn`, '#!/bin/sh\necho run >> "$0.count"\necho "working on it" >&2\nexec cat\n')
    pb.bed.kubelet.setImage(img, {commandMap: {'/bin/fn': fnFile}})
    // Re-check the tag on every lookup (the default is once a minute), so the move is seen at once.
    const registryClient = new RegistryClient({insecureRegistries: [registry.host], retryDelayMs: 5, revalidateAfterMs: 0})
    const fns = await makeFunctionsDir(await temp.make())
    metricsPort = await freePort()
    const base = serveOptions({...fns, disableRuntimes: 'exec'})
    running = await startInProcess({
      ...base,
      metricsPort,
      responseCache: {...DEFAULT_RESPONSE_CACHE, ttlMs: 10 * 60_000},
      pod: {
        ...base.pod,
        namespace: pb.namespace(),
        wrapperServerImage: WRAPPER_IMAGE,
        podAddress: 'pod-ip',
        metadata: new RegistryMetadataSource(registryClient),
        kubeConfig: pb.bed.kubeConfig,
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

  it('hits for the same digest and input; misses (image-changed) once the tag points at another digest', async () => {
    const first = await client!.evaluateRaw(img, RL, {deadline: Date.now() + 60_000})
    const second = await client!.evaluateRaw(img, RL, {deadline: Date.now() + 60_000})
    expect(await runs()).to.equal(1)
    expect(second.resourceList.equals(first.resourceList)).to.equal(true)
    expect(second.log.toString()).to.equal('working on it\n')
    expect(second.log.equals(first.log)).to.equal(true)
    expect(second.trailers.getMap()).to.deep.equal(first.trailers.getMap())
    expect(second.trailers.get('fnr-evaluator')).to.deep.equal(['pod'])

    // Move the tag: same name, another image (another digest).
    await pushImage(registry, 'fn/counted:v1', {entrypoint: ['/bin/fn'], files: {'bin/fn': 'version 2\n'}})
    await client!.evaluateRaw(img, RL, {deadline: Date.now() + 60_000})
    expect(await runs()).to.equal(2)
    await client!.evaluateRaw(img, RL, {deadline: Date.now() + 60_000})
    expect(await runs()).to.equal(2)

    const m = await scrape(metricsPort)
    expect(m.value('fnr_response_cache_lookups_total', {result: 'hit'})).to.equal(2)
    expect(m.value('fnr_response_cache_lookups_total', {result: 'miss', reason: 'absent'})).to.equal(1)
    expect(m.value('fnr_response_cache_lookups_total', {result: 'miss', reason: 'image-changed'})).to.equal(1)
    expect(m.value('fnr_evaluations_total', {runtime: 'cache', image: img, code: 'OK'})).to.equal(2)
    expect(m.value('fnr_evaluations_total', {runtime: 'pod', image: img, code: 'OK'})).to.equal(2)
    // The registry client's calls and its metadata cache.
    expect(m.value('fnr_registry_requests_total', {method: 'GET', status: '200'})).to.be.greaterThan(0)
    expect(m.value('fnr_registry_requests_total', {method: 'HEAD', status: '200'})).to.be.greaterThan(0)
    expect(m.value('fnr_registry_metadata_lookups_total', {result: 'miss'})).to.be.at.least(1)
    expect(m.value('fnr_registry_metadata_lookups_total', {result: 'revalidated'})).to.be.at.least(3)
  })
})
