/**
 * The exec evaluator's answers before any function process starts (src/lib/evaluators/exec.ts):
 * what it knows, a call cancelled or past its deadline, and the call-time re-checks of the binary
 * against what it saw at start-up (docs/process.md, "The exec runtime re-checks each binary before
 * it runs"). Each refused call starts no process (the unit guard would fail it); the calls that run
 * a function are in ./exec.test.ts.
 */
import {expect} from 'chai'
import {mkdir, realpath, rename, rm, symlink, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {loadExecConfig} from '../../src/lib/config/exec-config.js'
import {FnrError} from '../../src/lib/errors.js'
import {binaryIdentity, ExecEvaluator} from '../../src/lib/evaluators/exec.js'
import {ProcessLauncher} from '../../src/lib/process/launcher.js'
import {SAMPLE_RL, TempDirs, writeExecutable} from '../support/tmp.js'

const IMAGE = 'example.com/fn:v1'

describe('exec evaluator: answers before a function starts', () => {
  const temp = new TempDirs()
  const launcher = new ProcessLauncher()
  const evaluators: ExecEvaluator[] = []
  after(async () => {
    await Promise.all(evaluators.map((e) => e.close()))
    await launcher.close()
    await temp.cleanup()
  })

  async function setup(): Promise<{root: string; dir: string; binary: string; exec: ExecEvaluator}> {
    const root = await realpath(await temp.make())
    const dir = path.join(root, 'functions')
    await mkdir(dir)
    await writeExecutable(path.join(dir, 'fn'), '#!/bin/sh\nexec cat\n')
    await writeFile(path.join(root, 'config.yaml'), `functions:\n- function: fn\n  images: [${IMAGE}]\n`)
    const exec = new ExecEvaluator({config: await loadExecConfig({configPath: path.join(root, 'config.yaml'), functionsDir: dir}), maxOutputBytes: 1024 * 1024, launcher})
    evaluators.push(exec)
    return {root, dir, binary: path.join(dir, 'fn'), exec}
  }

  async function failure(exec: ExecEvaluator, request: Partial<Parameters<ExecEvaluator['evaluate']>[0]> = {}): Promise<FnrError> {
    const err = await exec.evaluate({image: IMAGE, resourceList: SAMPLE_RL, ...request}).then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(err, 'the call should fail').to.be.instanceOf(FnrError)
    return err as FnrError
  }

  it('knows the mapped image (its binary and the binary\'s identity), and an unknown one is NotFound', async () => {
    const {binary, exec} = await setup()
    expect(exec.knows(IMAGE)).to.equal(true)
    expect(exec.binaryFor(IMAGE)).to.equal(binary)
    expect(await exec.identify(IMAGE)).to.deep.equal(binaryIdentity(binary))
    expect(binaryIdentity(binary)).to.include({runtime: 'exec', binary})
    expect(exec.knows('example.com/unknown:v1')).to.equal(false)
    expect(exec.binaryFor('example.com/unknown:v1')).to.equal(undefined)
    expect(await exec.identify('example.com/unknown:v1')).to.equal(undefined)
    const e = await failure(exec, {image: 'example.com/unknown:v1'})
    expect(e.kind).to.equal('NotFound')
    expect(e.message).to.equal('function "example.com/unknown:v1" not found')
  })

  it('a binary rewritten in place is a new identity', async () => {
    const {binary, exec} = await setup()
    const before = await exec.identify(IMAGE)
    await new Promise((r) => setTimeout(r, 20))
    await writeFile(binary, '#!/bin/sh\nexec cat\n# changed\n')
    expect(await exec.identify(IMAGE)).to.not.deep.equal(before)
  })

  it('a call cancelled before it starts is Cancelled; one past its deadline is DeadlineExceeded', async () => {
    const {exec} = await setup()
    const aborted = new AbortController()
    aborted.abort()
    const cancelled = await failure(exec, {signal: aborted.signal})
    expect(cancelled.kind).to.equal('Cancelled')
    expect(cancelled.message).to.equal(`function "${IMAGE}" was cancelled before it started`)
    const late = await failure(exec, {deadline: Date.now() - 1})
    expect(late.kind).to.equal('DeadlineExceeded')
    expect(late.message).to.equal(`deadline exceeded before function "${IMAGE}" started`)
  })

  it('refuses a binary removed since start-up (FailedPrecondition)', async () => {
    const {binary, exec} = await setup()
    await rm(binary)
    const e = await failure(exec)
    expect(e.kind).to.equal('FailedPrecondition')
    expect(e.grpcCode).to.equal(9)
    expect(e.message).to.equal(`exec function "${IMAGE}" refused: the binary ${binary} no longer exists`)
  })

  it('refuses a binary swapped for a symlink, naming where it now leads', async () => {
    const {root, binary, exec} = await setup()
    await writeExecutable(path.join(root, 'evil'), '#!/bin/sh\necho evil\n')
    await rm(binary)
    await symlink(path.join(root, 'evil'), binary)
    expect((await failure(exec)).message).to.equal(`exec function "${IMAGE}" refused: the binary ${binary} now resolves to ${root}/evil (a symlink was put in its place or in its path)`)
  })

  it('refuses a binary replaced by another file at its path (device and inode)', async () => {
    const {root, binary, exec} = await setup()
    await writeExecutable(path.join(root, 'other'), '#!/bin/sh\nexec cat\n')
    await rename(path.join(root, 'other'), binary)
    expect((await failure(exec)).message).to.match(new RegExp(`^exec function "example\\.com/fn:v1" refused: the binary ${binary.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is not the file it was at start-up \\(device:inode \\d+:\\d+, now \\d+:\\d+\\)$`))
  })

  it('refuses when the functions directory is gone, or resolves elsewhere', async () => {
    const gone = await setup()
    await rm(gone.dir, {recursive: true})
    expect((await failure(gone.exec)).message).to.equal(`exec function "${IMAGE}" refused: the functions directory ${gone.dir} no longer exists`)

    const moved = await setup()
    const other = path.join(moved.root, 'other')
    await mkdir(other)
    await writeExecutable(path.join(other, 'fn'), '#!/bin/sh\nexec cat\n')
    await rename(moved.dir, path.join(moved.root, 'functions.old'))
    await symlink(other, moved.dir)
    expect((await failure(moved.exec)).message).to.equal(`exec function "${IMAGE}" refused: the functions directory ${moved.dir} now resolves to ${other}, not ${moved.dir} as at start-up`)
  })
})
