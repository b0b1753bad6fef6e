/**
 * Warm-up of the pod cache (src/lib/pods/runtime/warmup.ts): one pod per image, a bounded number at
 * once, a failing image reported beside the others and never stopping them. The cache is a fake
 * whose warm() the test controls.
 */
import {expect} from 'chai'

import {warmUpPods} from '../../src/lib/pods/runtime/warmup.js'
import {memoryLogger} from '../support/memory-logger.js'

describe('pod runtime: warm-up', () => {
  it('warms every image; a failing one is reported with its error, and the others still warm', async () => {
    const asked: string[] = []
    const cache = {
      warm: async (image: string) => {
        asked.push(image)
        if (image.includes('broken')) throw new Error(`cannot pull ${image}`)
      },
    }
    const logger = memoryLogger()
    const result = await warmUpPods(cache, ['a:v1', 'broken:v1', 'c:v1'], {logger})
    expect([...asked].sort()).to.deep.equal(['a:v1', 'broken:v1', 'c:v1'])
    expect([...result.ready].sort()).to.deep.equal(['a:v1', 'c:v1'])
    expect(result.failed).to.deep.equal([{image: 'broken:v1', error: 'cannot pull broken:v1'}])
    expect(result.ms).to.be.at.least(0)
    expect(logger.lines.filter((l) => l.level === 'warn').map((l) => l.msg)).to.deep.equal(['cannot warm up a function pod'])
    expect(logger.lines.filter((l) => l.msg === 'pod cache warm-up finished')).to.have.length(1)
  })

  it('runs at most `concurrency` warm-ups at once, and each image once', async () => {
    let running = 0
    let most = 0
    const asked: string[] = []
    const cache = {
      warm: async (image: string) => {
        asked.push(image)
        running++
        most = Math.max(most, running)
        await new Promise((r) => setTimeout(r, 5))
        running--
      },
    }
    const images = Array.from({length: 10}, (_, i) => `img-${i}:v1`)
    const result = await warmUpPods(cache, images, {concurrency: 3})
    expect(most).to.equal(3)
    expect([...asked].sort()).to.deep.equal([...images].sort())
    expect(result.ready).to.have.length(10)
    expect(result.failed).to.deep.equal([])
  })

  it('no images: nothing is warmed and nothing is logged', async () => {
    const logger = memoryLogger()
    const result = await warmUpPods({warm: async () => expect.fail('no warm-up expected')}, [], {logger})
    expect(result).to.deep.include({ready: [], failed: []})
    expect(logger.lines).to.deep.equal([])
  })
})
