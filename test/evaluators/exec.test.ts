import {expect} from 'chai'
import {writeFile} from 'node:fs/promises'
import path from 'node:path'

import {loadExecConfig} from '../../src/lib/config/exec-config.js'
import {FnrError} from '../../src/lib/errors.js'
import {ExecEvaluator} from '../../src/lib/evaluators/exec.js'
import {MultiEvaluator} from '../../src/lib/evaluators/multi.js'
import {makeFunctionsDir} from '../support/serve.js'
import {SAMPLE_RL, TempDirs, writeExecutable} from '../support/tmp.js'

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

describe('exec evaluator: exit 0 with no output', () => {
  const temp = new TempDirs()
  afterEach(() => temp.cleanup())

  for (const [name, script, what] of [
    ['empty', '#!/bin/sh\ncat >/dev/null\necho "said nothing" >&2\n', 'no output'],
    ['blank', '#!/bin/sh\ncat >/dev/null\nprintf "\\n\\t \\n\\r\\n"\n', 'only whitespace (6 bytes)'],
  ] as const) {
    it(`is FunctionFailed (gRPC INTERNAL) for ${name} stdout, with a message that says so and the stderr`, async () => {
      const dir = await temp.make()
      await writeExecutable(path.join(dir, name), script)
      await writeFile(path.join(dir, 'config.yaml'), `functions:\n- function: ${name}\n  images: [example.com/${name}:v1]\n`)
      const exec = new ExecEvaluator({config: await loadExecConfig({configPath: path.join(dir, 'config.yaml'), functionsDir: dir}), maxOutputBytes: 1024 * 1024})
      try {
        await exec.evaluate({image: `example.com/${name}:v1`, resourceList: SAMPLE_RL})
        expect.fail('should throw')
      } catch (err) {
        const e = err as FnrError
        expect(e.kind).to.equal('FunctionFailed')
        expect(e.grpcCode).to.equal(13)
        expect(e.message).to.contain(`exited with code 0 but wrote ${what} to stdout, not a ResourceList`)
        expect(e.message).to.contain('would delete every resource of the package')
        if (name === 'empty') expect(e.message).to.contain('stderr:\nsaid nothing')
      }
    })
  }
})
