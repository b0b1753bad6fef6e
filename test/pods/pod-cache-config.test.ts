import {expect} from 'chai'
import {writeFile} from 'node:fs/promises'
import path from 'node:path'

import {PodCacheConfig} from '../../src/lib/config/pod-cache-config.js'
import {TempDirs} from '../support/tmp.js'

const DEFAULTS = {ttlMs: 10 * 60_000, maxWaitlistLength: 2, maxParallelPods: 3}

// Upstream's podcachemanager_unit_test getParamsForImage / loadPodCacheConfig scenarios.
describe('--pod-cache-config', () => {
  const temp = new TempDirs()
  after(() => temp.cleanup())

  it('full override', () => {
    const c = PodCacheConfig.parse('- name: img\n  timeToLive: 5m\n  maxWaitlistLength: 10\n  maxParallelPodsPerFunction: 5\n', 'x')
    expect(c.settingsFor('img', DEFAULTS)).to.deep.equal({ttlMs: 5 * 60_000, maxWaitlistLength: 10, maxParallelPods: 5})
  })

  it('partial override: zeros and missing fields fall back to the flags', () => {
    const c = PodCacheConfig.parse('- name: img\n  timeToLive: 3m\n  maxWaitlistLength: 0\n', 'x')
    expect(c.settingsFor('img', DEFAULTS)).to.deep.equal({ttlMs: 3 * 60_000, maxWaitlistLength: 2, maxParallelPods: 3})
  })

  it('an invalid or zero TTL uses --pod-ttl (invalid ones are reported)', () => {
    const c = PodCacheConfig.parse('- name: a\n  timeToLive: soon\n- name: b\n  timeToLive: 0s\n', 'x')
    expect(c.settingsFor('a', DEFAULTS).ttlMs).to.equal(DEFAULTS.ttlMs)
    expect(c.settingsFor('b', DEFAULTS).ttlMs).to.equal(DEFAULTS.ttlMs)
    expect(c.warnings).to.have.length(1)
    expect(c.warnings[0]).to.contain('soon')
  })

  it('an unknown image gets all defaults; names match exactly', () => {
    const c = PodCacheConfig.parse('- name: ghcr.io/a/b:v1\n  maxWaitlistLength: 9\n', 'x')
    expect(c.settingsFor('ghcr.io/a/b:v2', DEFAULTS)).to.deep.equal(DEFAULTS)
    expect(c.settingsFor('b:v1', DEFAULTS)).to.deep.equal(DEFAULTS)
  })

  it('parses a valid list with resources; the last duplicate wins; images() is the warm-up list', () => {
    const c = PodCacheConfig.parse(
      '- name: a\n  maxParallelPodsPerFunction: 2\n- name: b\n  resources: {requests: {cpu: 50m}, limits: {memory: 256Mi}}\n- name: a\n  maxParallelPodsPerFunction: 4\n',
      'x',
    )
    expect(c.images()).to.deep.equal(['a', 'b'])
    expect(c.settingsFor('a', DEFAULTS).maxParallelPods).to.equal(4)
    expect(c.settingsFor('b', DEFAULTS).resources).to.deep.equal({requests: {cpu: '50m'}, limits: {memory: '256Mi'}})
  })

  it('[] and an empty file are valid and empty', () => {
    expect(PodCacheConfig.parse('[]', 'x').images()).to.deep.equal([])
    expect(PodCacheConfig.parse('', 'x').images()).to.deep.equal([])
  })

  it('invalid YAML, a scalar or an entry without a name is a Config error naming the file', () => {
    for (const text of ['- name: [unclosed', 'img\n', '- timeToLive: 1m\n', '- name: a\n  maxWaitlistLength: two\n']) {
      expect(() => PodCacheConfig.parse(text, '/cfg.yaml'), text).to.throw(/pod cache config \/cfg\.yaml/).with.property('kind', 'Config')
    }
  })

  it('a missing file is reported as missing, not an error', async () => {
    const dir = await temp.make()
    const missing = await PodCacheConfig.load(path.join(dir, 'nope.yaml'))
    expect(missing.missing).to.equal(true)
    expect(missing.config.images()).to.deep.equal([])
    const file = path.join(dir, 'c.yaml')
    await writeFile(file, '- name: a\n')
    const loaded = await PodCacheConfig.load(file)
    expect(loaded.missing).to.equal(false)
    expect(loaded.config.images()).to.deep.equal(['a'])
  })
})
