/**
 * `fnr pods warm` before and after the cluster (src/lib/pods/admin/warm.ts): the images to warm
 * (the pod cache config's, then --image, once each) with the usage and config errors it gives
 * before any cluster call, one line per image, and the run's failure naming the first image that
 * failed. The warming itself is in test/operator/pods-warm.test.ts.
 */
import {writeFile} from 'node:fs/promises'
import path from 'node:path'

import {expect} from 'chai'

import {warmFailure, warmLine, warmList, type WarmResult, type WarmSummary} from '../../src/lib/pods/admin/warm.js'
import {failure} from '../support/fnr-error.js'
import {TempDirs} from '../support/tmp.js'

const ok = (image: string, action: WarmResult['action'], pod = `${image.split('/').pop()!.replace(/[:.]/g, '-')}-1`): WarmResult => ({image, ok: true, pod, action, error: null, ms: 10})

describe('fnr pods warm: the list and the report', () => {
  const temp = new TempDirs()
  after(() => temp.cleanup())

  it('the pod cache config\'s images, then --image, each once', async () => {
    const file = path.join(await temp.make('fnr-warm-'), 'pod-cache-config.yaml')
    await writeFile(file, 'example.com/a:v1: 30m\nexample.com/b:v1: 30m\n')
    const {images} = await warmList(['example.com/c:v1', 'example.com/a:v1'], file)
    expect(images).to.deep.equal(['example.com/a:v1', 'example.com/b:v1', 'example.com/c:v1'])
    expect((await warmList(['example.com/c:v1'], undefined)).images).to.deep.equal(['example.com/c:v1'])
    // --pod-cache-config= (empty) is no file, as for fnr serve
    expect((await warmList(['example.com/c:v1'], '')).images).to.deep.equal(['example.com/c:v1'])
  })

  it('refuses nothing to warm, an empty --image, a missing config and a config listing no images, before any cluster call', async () => {
    const nothing = await failure(warmList([], undefined))
    expect(nothing.kind).to.equal('Usage')
    expect(nothing.message).to.equal('nothing to warm: pass --pod-cache-config FILE and/or --image IMAGE')
    expect((await failure(warmList(['  '], undefined))).message).to.equal('--image must not be empty')
    const dir = await temp.make('fnr-warm-')
    const missing = await failure(warmList([], path.join(dir, 'nope.yaml')))
    expect(missing.kind).to.equal('Config')
    expect(missing.message).to.equal(`pod cache config ${path.join(dir, 'nope.yaml')} does not exist`)
    const empty = path.join(dir, 'empty.yaml')
    await writeFile(empty, '')
    expect((await failure(warmList([], empty))).message).to.equal(`pod cache config ${empty} lists no images`)
    expect((await warmList(['example.com/c:v1'], empty)).images).to.deep.equal(['example.com/c:v1'])
  })

  it('one line per image: the pod and how it got ready, or the failure', () => {
    expect(warmLine(ok('example.com/a:v1', 'created', 'a-1'))).to.equal('example.com/a:v1: ready, pod a-1 (created)')
    expect(warmLine(ok('example.com/a:v1', 'existing', 'a-1'))).to.equal('example.com/a:v1: ready, pod a-1 (already ready)')
    expect(warmLine(ok('example.com/a:v1', 'waited', 'a-1'))).to.equal('example.com/a:v1: ready, pod a-1 (was starting)')
    expect(warmLine({image: 'example.com/b:v1', ok: false, pod: null, action: 'none', error: 'cannot pull', ms: 5})).to.equal('example.com/b:v1: failed: cannot pull')
  })

  it('the run fails when an image failed, naming how many and the first; the report rides along', () => {
    const summary = (images: WarmResult[]): WarmSummary => ({namespace: 'fn', templateVersion: 'v1', template: 'inline', images, ready: images.filter((i) => i.ok).length, failed: images.filter((i) => !i.ok).length, created: 0})
    expect(warmFailure(summary([ok('example.com/a:v1', 'created')]))).to.equal(undefined)
    const bad = summary([ok('example.com/a:v1', 'created'), {image: 'example.com/b:v1', ok: false, pod: null, action: 'none', error: 'cannot pull', ms: 5}, {image: 'example.com/c:v1', ok: false, pod: 'c-1', action: 'created', error: 'crashed', ms: 5}])
    const err = warmFailure(bad)!
    expect(err.kind).to.equal('Internal')
    expect(err.message).to.equal('2 of 3 images did not get a ready pod (first: example.com/b:v1: failed: cannot pull)')
    expect(err.details.report).to.equal(bad)
  })
})
