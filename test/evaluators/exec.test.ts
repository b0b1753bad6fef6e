import {expect} from 'chai'
import {mkdir, realpath, rename, rm, symlink, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {loadExecConfig} from '../../src/lib/config/exec-config.js'
import {FnrError} from '../../src/lib/errors.js'
import {ProcessLauncher} from '../../src/lib/process/launcher.js'
import {ExecEvaluator} from '../../src/lib/evaluators/exec.js'
import {MultiEvaluator} from '../../src/lib/evaluators/multi.js'
import {makeFunctionsDir} from '../support/serve.js'
import {SAMPLE_RL, TempDirs, writeExecutable} from '../support/tmp.js'

describe('exec evaluator', () => {
  const temp = new TempDirs()
  afterEach(() => temp.cleanup())

  async function evaluator(): Promise<ExecEvaluator> {
    const fns = await makeFunctionsDir(await temp.make())
    return new ExecEvaluator({config: await loadExecConfig(fns), maxOutputBytes: 1024 * 1024, launcher: new ProcessLauncher()})
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
      const exec = new ExecEvaluator({config: await loadExecConfig({configPath: path.join(dir, 'config.yaml'), functionsDir: dir}), maxOutputBytes: 1024 * 1024, launcher: new ProcessLauncher()})
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

describe('exec evaluator: each call re-checks the binary', () => {
  const temp = new TempDirs()
  afterEach(() => temp.cleanup())

  const CAT = '#!/bin/sh\nexec cat\n'
  const EVIL = '#!/bin/sh\ncat >/dev/null\necho "kind: ResourceList"\necho "# outside"\n'

  async function setup(): Promise<{root: string; dir: string; dirReal: string; exec: ExecEvaluator}> {
    const root = await temp.make()
    const dir = path.join(root, 'functions')
    await mkdir(dir)
    await writeExecutable(path.join(dir, 'fn'), CAT)
    await writeFile(path.join(root, 'config.yaml'), 'functions:\n- function: fn\n  images: [example.com/fn:v1]\n')
    const exec = new ExecEvaluator({config: await loadExecConfig({configPath: path.join(root, 'config.yaml'), functionsDir: dir}), maxOutputBytes: 1024 * 1024, launcher: new ProcessLauncher()})
    // the first call runs: the checks pass for an unchanged binary
    expect((await exec.evaluate({image: 'example.com/fn:v1', resourceList: SAMPLE_RL})).resourceList.equals(SAMPLE_RL)).to.equal(true)
    await writeExecutable(path.join(root, 'evil'), EVIL)
    return {root, dir, dirReal: await realpath(dir), exec}
  }

  async function refused(exec: ExecEvaluator): Promise<string> {
    try {
      await exec.evaluate({image: 'example.com/fn:v1', resourceList: SAMPLE_RL})
    } catch (err) {
      const e = err as FnrError
      expect(e.kind, e.message).to.equal('FailedPrecondition')
      expect(e.grpcCode).to.equal(9)
      return e.message
    }
    return expect.fail('the call should be refused')
  }

  it('refuses a binary swapped for a symlink to a file outside the functions directory', async () => {
    const {root, dir, exec} = await setup()
    await rm(path.join(dir, 'fn'))
    await symlink(path.join(root, 'evil'), path.join(dir, 'fn'))
    const message = await refused(exec)
    expect(message).to.equal(`exec function "example.com/fn:v1" refused: the binary ${await realpath(dir)}/fn now resolves to ${await realpath(root)}/evil (a symlink was put in its place or in its path)`)
  })

  it('refuses a functions directory swapped for a symlink to another directory', async () => {
    const {root, dir, dirReal, exec} = await setup()
    const other = path.join(root, 'other')
    await mkdir(other)
    await writeExecutable(path.join(other, 'fn'), EVIL)
    await rename(dir, path.join(root, 'functions.old'))
    await symlink(other, dir)
    const message = await refused(exec)
    expect(message).to.equal(`exec function "example.com/fn:v1" refused: the functions directory ${dir} now resolves to ${await realpath(other)}, not ${dirReal} as at start-up`)
  })

  it('runs a binary whose path now leads through a symlink to the very file checked at start-up', async () => {
    const {dir, exec} = await setup()
    // The same file (device and inode) under another name, and a symlink in its place: what runs is unchanged.
    await rename(path.join(dir, 'fn'), path.join(dir, 'fn.real'))
    await symlink('fn.real', path.join(dir, 'fn'))
    expect((await exec.evaluate({image: 'example.com/fn:v1', resourceList: SAMPLE_RL})).resourceList.equals(SAMPLE_RL)).to.equal(true)
  })

  it('refuses a binary replaced by another file at the same path (device and inode)', async () => {
    const {root, dir, exec} = await setup()
    await rename(path.join(root, 'evil'), path.join(dir, 'fn'))
    const message = await refused(exec)
    expect(message).to.match(/^exec function "example.com\/fn:v1" refused: the binary \S+\/fn is not the file it was at start-up \(device:inode \d+:\d+, now \d+:\d+\)$/)
  })

  it('refuses a binary that was removed', async () => {
    const {dir, exec} = await setup()
    await rm(path.join(dir, 'fn'))
    expect(await refused(exec)).to.match(/refused: the binary \S+\/fn no longer exists$/)
  })
})
