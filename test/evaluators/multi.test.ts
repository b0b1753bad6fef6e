import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import type {EvaluationRequest, Evaluator} from '../../src/lib/evaluator.js'
import {MultiEvaluator} from '../../src/lib/evaluators/multi.js'

class Fake implements Evaluator {
  calls = 0
  constructor(
    readonly name: string,
    private readonly behaviour: 'ok' | 'notfound' | 'fail',
  ) {}

  async evaluate(req: EvaluationRequest) {
    this.calls++
    if (this.behaviour === 'notfound') throw new FnrError('NotFound', `function "${req.image}" not found`)
    if (this.behaviour === 'fail') throw new FnrError('FunctionFailed', `${this.name} failed`)
    return {resourceList: Buffer.from(this.name), log: Buffer.alloc(0), evaluator: this.name}
  }

  async close() {}
}

const req = {image: 'x.io/f:v1', resourceList: Buffer.from('kind: ResourceList')}

/** A Fake that also says up front which images it knows (as the exec evaluator does). */
class Knowing extends Fake {
  constructor(
    name: string,
    behaviour: 'ok' | 'notfound' | 'fail',
    private readonly known: string[],
  ) {
    super(name, behaviour)
  }

  knows(image: string): boolean {
    return this.known.includes(image)
  }
}

describe('multi evaluator', () => {
  it('always tries exec before pod (upstream order is random: it iterates a Go map)', async () => {
    for (let i = 0; i < 20; i++) {
      const exec = new Fake('exec', 'ok')
      const pod = new Fake('pod', 'ok')
      const res = await new MultiEvaluator([exec, pod]).evaluate(req)
      expect(res.evaluator).to.equal('exec')
      expect(pod.calls).to.equal(0)
    }
  })

  it('falls through on NotFound only', async () => {
    const exec = new Fake('exec', 'notfound')
    const pod = new Fake('pod', 'ok')
    expect((await new MultiEvaluator([exec, pod]).evaluate(req)).evaluator).to.equal('pod')
    expect(exec.calls).to.equal(1)
  })

  it('stops at any other error', async () => {
    const exec = new Fake('exec', 'fail')
    const pod = new Fake('pod', 'ok')
    try {
      await new MultiEvaluator([exec, pod]).evaluate(req)
      expect.fail('should throw')
    } catch (err) {
      expect((err as FnrError).kind).to.equal('FunctionFailed')
    }
    expect(pod.calls).to.equal(0)
  })

  it('passes over an evaluator that says it does not know the image, without calling it', async () => {
    const exec = new Knowing('exec', 'ok', ['other.io/g:v1'])
    const pod = new Fake('pod', 'ok')
    expect((await new MultiEvaluator([exec, pod]).evaluate(req)).evaluator).to.equal('pod')
    expect(exec.calls).to.equal(0)
    expect(pod.calls).to.equal(1)
  })

  it('calls an evaluator that says it knows the image, and is NotFound when none knows it', async () => {
    const exec = new Knowing('exec', 'ok', [req.image])
    const pod = new Fake('pod', 'ok')
    expect((await new MultiEvaluator([exec, pod]).evaluate(req)).evaluator).to.equal('exec')
    expect(pod.calls).to.equal(0)
    try {
      await new MultiEvaluator([new Knowing('exec', 'ok', [])]).evaluate(req)
      expect.fail('should throw')
    } catch (err) {
      expect((err as FnrError).kind).to.equal('NotFound')
      expect((err as FnrError).message).to.equal('function "x.io/f:v1" not found')
    }
  })

  it('is NotFound when every evaluator is', async () => {
    try {
      await new MultiEvaluator([new Fake('exec', 'notfound'), new Fake('pod', 'notfound')]).evaluate(req)
      expect.fail('should throw')
    } catch (err) {
      expect((err as FnrError).kind).to.equal('NotFound')
      expect((err as FnrError).message).to.equal('function "x.io/f:v1" not found')
    }
  })

  it('identify() is the identity declared by the evaluator its order would call: exec for an image exec knows, else the next one', async () => {
    const exec = new Knowing('exec', 'ok', ['x.io/known:v1'])
    const pod = new Fake('pod', 'ok')
    const asked: string[] = []
    Object.assign(exec, {identify: async (image: string) => (asked.push(`exec ${image}`), {runtime: 'exec', binary: '/fn/known', stat: '1:2'})})
    Object.assign(pod, {identify: async (image: string) => (asked.push(`pod ${image}`), {runtime: 'pod', digest: 'sha256:abc'})})
    const multi = new MultiEvaluator([exec, pod])
    expect(await multi.identify('x.io/known:v1')).to.deep.equal({runtime: 'exec', binary: '/fn/known', stat: '1:2'})
    expect(await multi.identify('x.io/other:v1')).to.deep.equal({runtime: 'pod', digest: 'sha256:abc'})
    // Exec is not asked about an image it does not know, and pod not about one exec serves.
    expect(asked).to.deep.equal(['exec x.io/known:v1', 'pod x.io/other:v1'])
    // An evaluator that declares nothing gives no identity (never cached), without falling further.
    expect(await new MultiEvaluator([new Fake('exec', 'ok'), pod]).identify('x.io/other:v1')).to.equal(undefined)
  })

  it('refuses to exist with no evaluators (upstream panics on the first request instead)', () => {
    expect(() => new MultiEvaluator([])).to.throw(FnrError, /no function runtime is enabled/)
  })
})
