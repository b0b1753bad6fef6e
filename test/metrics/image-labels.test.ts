/**
 * Image labels of fnr serve's metrics (src/lib/telemetry/metrics.ts; docs/observability.md): callers do
 * not choose them. Only an image a runtime served becomes a label (at most MAX_IMAGE_LABELS, then
 * "other"); a made-up name is "unknown", so it cannot fill the cap; label values carry no control
 * or bidirectional characters and are cut at MAX_IMAGE_LABEL_LENGTH.
 */
import {expect} from 'chai'

import {createMetrics, imageLabelText, MAX_IMAGE_LABEL_LENGTH, MAX_IMAGE_LABELS, type PrometheusMetrics} from '../../src/lib/telemetry/metrics.js'
import {parseExposition, type Exposition} from './prom-text.js'

async function scrapeOf(m: PrometheusMetrics): Promise<Exposition> {
  return parseExposition(await m.registry.metrics())
}

describe('metrics: image labels are the images runtimes served, sanitized', () => {
  let m: PrometheusMetrics
  beforeEach(async () => {
    m = await createMetrics({defaultMetrics: false})
  })

  it('500 made-up names are "unknown" and fill nothing: a real image after them is still labelled by name', async () => {
    for (let i = 0; i < 500; i++) m.evaluation('none', `example.com/made-up-${i}:v1`, 'NOT_FOUND', 0.001)
    // a pod runtime call that never reached a started pod (the image does not exist) says nothing either
    for (let i = 0; i < 50; i++) m.evaluation('pod', `example.com/no-such-${i}:v1`, 'DEADLINE_EXCEEDED', 1)
    m.evaluation('exec', 'example.com/real:v1', 'OK', 0.01)
    m.evaluation('pod', 'example.com/pulled:v1', 'OK', 0.01)
    const x = await scrapeOf(m)
    expect(x.labelValues('fnr_evaluations_total', 'image').sort()).to.deep.equal(['example.com/pulled:v1', 'example.com/real:v1', 'unknown'])
    expect(x.value('fnr_evaluations_total', {image: 'unknown'})).to.equal(550)
    expect(x.value('fnr_evaluations_total', {image: 'example.com/real:v1', runtime: 'exec'})).to.equal(1)
    // once served, later calls of the image keep its label, whatever their outcome
    m.evaluation('cache', 'example.com/real:v1', 'OK', 0.0001)
    m.evaluation('pod', 'example.com/pulled:v1', 'INTERNAL', 0.01)
    const y = await scrapeOf(m)
    expect(y.value('fnr_evaluations_total', {image: 'example.com/real:v1', runtime: 'cache'})).to.equal(1)
    expect(y.value('fnr_evaluations_total', {image: 'example.com/pulled:v1', code: 'INTERNAL'})).to.equal(1)
  })

  it(`labels at most ${MAX_IMAGE_LABELS} served images, then "other"`, async () => {
    for (let i = 0; i < MAX_IMAGE_LABELS + 5; i++) m.evaluation('exec', `example.com/fn-${i}:v1`, 'OK', 0.001)
    const x = await scrapeOf(m)
    const labels = x.labelValues('fnr_evaluations_total', 'image')
    expect(labels).to.have.length(MAX_IMAGE_LABELS + 1)
    expect(x.value('fnr_evaluations_total', {image: 'other'})).to.equal(5)
  })

  it('replaces control and bidirectional characters and cuts long names', async () => {
    expect(imageLabelText('example.com/\u202Egnp.fn:v1')).to.equal('example.com/?gnp.fn:v1')
    expect(imageLabelText('a\u0000b\u001bc\u007fd\u0085e\u200bf\u2066g\ufeffh')).to.equal('a?b?c?d?e?f?g?h')
    expect(imageLabelText('example.com/fn:v1')).to.equal('example.com/fn:v1')
    const long = imageLabelText(`example.com/${'x'.repeat(1000)}:v1`)
    expect(long).to.have.length(MAX_IMAGE_LABEL_LENGTH)
    expect(long.endsWith('…')).to.equal(true)
    m.evaluation('exec', 'example.com/\u202Eevil:v1', 'OK', 0.001)
    const text = await m.registry.metrics()
    // eslint-disable-next-line no-control-regex
    expect(text).to.not.match(/[\u0000-\u0009\u000b-\u001f\u202a-\u202e]/)
    expect(text).to.contain('image="example.com/?evil:v1"')
  })

  it('pod cache lookups of an image whose first pod is starting are counted under its name once the pod is ready, "unknown" when it fails', async () => {
    m.podCacheLookup('example.com/cat:v1', 'miss')
    m.podCacheLookup('example.com/cat:v1', 'starting')
    m.podCacheLookup('example.com/made-up:v1', 'miss')
    expect((await scrapeOf(m)).matching('fnr_pod_cache_lookups_total', {})).to.have.length(0)
    m.podStarted('example.com/cat:v1', true)
    m.podStarted('example.com/made-up:v1', false)
    m.podCacheLookup('example.com/cat:v1', 'hit')
    const x = await scrapeOf(m)
    expect(x.value('fnr_pod_cache_lookups_total', {image: 'example.com/cat:v1', result: 'miss'})).to.equal(1)
    expect(x.value('fnr_pod_cache_lookups_total', {image: 'example.com/cat:v1', result: 'starting'})).to.equal(1)
    expect(x.value('fnr_pod_cache_lookups_total', {image: 'example.com/cat:v1', result: 'hit'})).to.equal(1)
    expect(x.value('fnr_pod_cache_lookups_total', {image: 'unknown', result: 'miss'})).to.equal(1)
  })
})
