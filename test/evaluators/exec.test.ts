import {expect} from 'chai'

import {loadExecConfig} from '../../src/lib/config/exec-config.js'
import {FnrError} from '../../src/lib/errors.js'
import {ExecEvaluator} from '../../src/lib/evaluators/exec.js'
import {MultiEvaluator} from '../../src/lib/evaluators/multi.js'
import {makeFunctionsDir} from '../support/serve.js'
import {SAMPLE_RL, TempDirs} from '../support/tmp.js'

describe('exec evaluator', () => {
  const temp = new TempDirs()
  afterEach(() => temp.cleanup())

  async function evaluator(): Promise<ExecEvaluator> {
    const fns = await makeFunctionsDir(await temp.make())
    return new ExecEvaluator({config: await loadExecConfig(fns), maxOutputBytes: 1024 * 1024})
  }

  it('says up front which images it knows, as evaluate() finds them', async () => {
    const exec = await evaluator()
    expect(exec.knows('example.com/cat:v1')).to.equal(true)
    expect(exec.knows('example.com/unknown:v1')).to.equal(false)
    const res = await exec.evaluate({image: 'example.com/cat:v1', resourceList: SAMPLE_RL})
    expect(res.resourceList.equals(SAMPLE_RL)).to.equal(true)
    try {
      await exec.evaluate({image: 'example.com/unknown:v1', resourceList: SAMPLE_RL})
      expect.fail('should throw')
    } catch (err) {
      expect((err as FnrError).kind).to.equal('NotFound')
    }
  })

  it('in a multi evaluator, an image it does not know goes to the next evaluator without a call to it', async () => {
    const exec = await evaluator()
    let evaluated = 0
    const original = exec.evaluate.bind(exec)
    exec.evaluate = (req) => {
      evaluated++
      return original(req)
    }
    const pod = {name: 'pod', evaluate: async () => ({resourceList: Buffer.from('pod'), log: Buffer.alloc(0), evaluator: 'pod'}), close: async () => {}}
    const multi = new MultiEvaluator([exec, pod])
    expect((await multi.evaluate({image: 'example.com/unknown:v1', resourceList: SAMPLE_RL})).evaluator).to.equal('pod')
    expect(evaluated).to.equal(0)
    expect((await multi.evaluate({image: 'example.com/cat:v1', resourceList: SAMPLE_RL})).evaluator).to.equal('exec')
    expect(evaluated).to.equal(1)
  })
})
