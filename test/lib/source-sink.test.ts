/**
 * `fnr source` and `fnr sink` as library calls (src/lib/source-sink.ts), with in-memory streams and
 * a temporary directory, and stdin read whole or stopped by an interrupt (src/lib/stdin.ts). The
 * commands' processes and the comparisons with kpt are in test/commands/source-sink.test.ts.
 */
import {existsSync} from 'node:fs'
import {readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {PassThrough, Readable} from 'node:stream'

import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import {runSink, runSource} from '../../src/lib/source-sink.js'
import {readStdin} from '../../src/lib/stdin.js'
import {failure} from '../support/fnr-error.js'
import {TempDirs} from '../support/tmp.js'

const CM = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata:\n  k: v\n'

async function source(args: string[], output = 'stdout', fnConfigPath?: string): Promise<string> {
  const out = new PassThrough()
  let text = ''
  out.on('data', (d: Buffer) => (text += d.toString()))
  await runSource({args, output, fnConfigPath}, {stdout: out})
  return text
}

describe('fnr source and fnr sink (in process)', () => {
  const temp = new TempDirs()
  after(() => temp.cleanup())

  it('source: the package as a wrapped ResourceList with path annotations, or unwrapped without them', async () => {
    const dir = await temp.make('fnr-src-')
    await writeFile(path.join(dir, 'cm.yaml'), CM)
    const wrapped = await source([dir])
    expect(wrapped).to.match(/^apiVersion: config\.kubernetes\.io\/v1\nkind: ResourceList\nitems:\n/)
    expect(wrapped).to.contain("internal.config.kubernetes.io/path: 'cm.yaml'")
    expect(wrapped).to.contain("config.kubernetes.io/path: 'cm.yaml'")
    const unwrapped = await source([dir], 'unwrap')
    expect(unwrapped).to.contain('name: cfg')
    expect(unwrapped).to.not.contain('kind: ResourceList')
    expect(unwrapped).to.not.contain('config.kubernetes.io/path')
  })

  it('source --fn-config: the one object becomes the functionConfig; not with unwrap', async () => {
    const dir = await temp.make('fnr-src-')
    await writeFile(path.join(dir, 'cm.yaml'), CM)
    const fc = path.join(await temp.make('fnr-fc-'), 'fc.yaml')
    await writeFile(fc, 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fn-config\ndata:\n  namespace: prod\n')
    const wrapped = await source([dir], 'stdout', fc)
    expect(wrapped).to.match(/\nfunctionConfig:\n {2}apiVersion: v1\n {2}kind: ConfigMap\n {2}metadata:\n {4}name: fn-config\n/)
    expect(await source([dir], 'unwrap', fc)).to.not.contain('fn-config')
    await writeFile(fc, `${CM}---\n${CM.replace('cfg', 'cfg2')}`)
    expect((await failure(source([dir], 'stdout', fc))).message).to.equal('expected exactly 1 functionConfig, found 2')
  })

  it('source refuses a bad --output and more than one package, as kpt does (usage errors)', async () => {
    const bad = await failure(source(['.'], 'json'))
    expect(bad.kind).to.equal('Usage')
    expect(bad.message).to.equal('invalid input for --output flag "json", must be "stdout" or "unwrap"')
    const two = await failure(source(['a', 'b']))
    expect(two.kind).to.equal('Usage')
    expect(two.message).to.equal('accepts at most 1 arg(s), received 2')
  })

  it('sink: the resources of stdin into a new directory, each to the file its path annotation names', async () => {
    const out = path.join(await temp.make('fnr-sink-'), 'out')
    const list = `apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a\n    annotations:\n      internal.config.kubernetes.io/path: 'sub/a.yaml'\n`
    const report = await runSink({args: [out]}, {stdin: Readable.from([Buffer.from(list)])})
    expect(report.dir).to.equal(out)
    expect(await readFile(path.join(out, 'sub', 'a.yaml'), 'utf8')).to.equal('apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n')
  })

  it('sink refuses no directory (usage), an existing one before reading stdin, and an empty stdin (nothing written)', async () => {
    const none = await failure(runSink({args: []}, {stdin: Readable.from([])}))
    expect(none.kind).to.equal('Usage')
    expect(none.message).to.equal('requires at least 1 arg(s), only received 0')
    const existing = await temp.make('fnr-sink-')
    let read = false
    const stdin = new Readable({
      read() {
        read = true
      },
    })
    await failure(runSink({args: [existing]}, {stdin}))
    expect(read, 'stdin read although the directory exists').to.equal(false)
    const target = path.join(await temp.make('fnr-sink-'), 'new')
    const empty = await failure(runSink({args: [target]}, {stdin: Readable.from([])}))
    expect(empty.kind).to.equal('InvalidArgument')
    expect(empty.message).to.match(/^stdin is empty: nothing written to /)
    expect(existsSync(target), 'the directory was made').to.equal(false)
  })

  it('stdin is read whole; an interrupt stops the reading with its reason and destroys the stream', async () => {
    expect((await readStdin(Readable.from([Buffer.from('a'), Buffer.from('b')]), undefined)).toString()).to.equal('ab')
    expect((await readStdin(Readable.from([Buffer.from('c')]), new AbortController().signal)).toString()).to.equal('c')
    const endless = new PassThrough()
    const abort = new AbortController()
    const reading = readStdin(endless, abort.signal).catch((e: unknown) => e)
    endless.write('partial')
    abort.abort(new FnrError('Cancelled', 'interrupted'))
    expect(((await reading) as FnrError).message).to.equal('interrupted')
    expect(endless.destroyed).to.equal(true)
    const already = new AbortController()
    already.abort(new FnrError('Cancelled', 'before'))
    expect(((await readStdin(new PassThrough(), already.signal).catch((e: unknown) => e)) as FnrError).message).to.equal('before')
  })
})
