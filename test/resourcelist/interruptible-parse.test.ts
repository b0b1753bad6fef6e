/**
 * The interruptible parse (yaml.ts parseStreamInterruptible, read.ts
 * parseResourceListInterruptible): it gives the event loop turns while it parses, so an abort
 * from a callback stops it; the stepped parse of large documents gives exactly what the yaml
 * package's parseAllDocuments gives; control characters in new output file names are refused.
 */
import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import {parseResourceList, parseResourceListInterruptible} from '../../src/lib/resourcelist/read.js'
import {checkNewFileName, checkRelativePath, escapeControl, stringifyResourceList} from '../../src/lib/resourcelist/write.js'
import {parseStream, parseStreamInterruptible} from '../../src/lib/resourcelist/yaml.js'

const doc = (i: number, keys: number) =>
  `# head ${i}\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-${i} # line\ndata:\n${Array.from({length: keys}, (_, j) => `  k${j}: "v ${i} ${j}"\n`).join('')}`

describe('interruptible parse', function () {
  this.timeout(120_000)

  it('an abort from a callback stops a long parse of many documents with the abort reason', async () => {
    // Several MB: far more than one slice (20 ms) of parsing, so the callback gets its turn.
    const text = Array.from({length: 3000}, (_, i) => doc(i, 40)).join('---\n')
    const controller = new AbortController()
    const reason = new FnrError('Cancelled', 'interrupted by SIGTERM')
    setImmediate(() => controller.abort(reason))
    const err = await parseStreamInterruptible(text, 'big', 'InvalidArgument', controller.signal).catch((e: unknown) => e)
    expect(err).to.equal(reason)
  })

  it('an abort stops the parse inside one large document', async () => {
    const text = doc(0, 100_000)
    const controller = new AbortController()
    setImmediate(() => controller.abort(new FnrError('Cancelled', 'stop')))
    const err = await parseResourceListInterruptible(text, {signal: controller.signal}).catch((e: unknown) => e)
    expect(err).to.be.instanceOf(FnrError)
    expect((err as FnrError).message).to.equal('stop')
  })

  it('gives what the one-shot parse gives: nodes, comments, errors with their lines', async () => {
    // One document above the stepped-parse threshold (64 KiB) and small ones around it.
    const text = [doc(1, 3), doc(2, 5000), doc(3, 2)].join('---\n')
    const a = stringifyResourceList(parseStream(text, 'x', 'InvalidArgument').map((d) => d.node))
    const b = stringifyResourceList((await parseStreamInterruptible(text, 'x', 'InvalidArgument')).map((d) => d.node))
    expect(b).to.equal(a)
    expect(a).to.contain('# head 2').and.contain('name: cm-2 # line')
    const wrapped = `apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n${Array.from({length: 300}, (_, i) => `- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: c${i}\n`).join('')}`
    expect(stringifyResourceList((await parseResourceListInterruptible(wrapped)).items)).to.equal(stringifyResourceList(parseResourceList(wrapped).items))
    const broken = `${doc(1, 5000)}  bad: [\n`
    const e1 = (() => {
      try {
        parseStream(broken, 'x', 'InvalidArgument')
      } catch (e) {
        return e as Error
      }
      return undefined
    })()
    const e2 = (await parseStreamInterruptible(broken, 'x', 'InvalidArgument').catch((e: unknown) => e)) as Error
    expect(e1?.message).to.match(/^x: MalformedYAMLError: line \d+/)
    expect(e2?.message).to.equal(e1?.message)
  })

  it('refuses new file names with control characters, escaped in the message; checkRelativePath leaves them to the sink', () => {
    for (const p of ['a\nb.yaml', 'sub/\tx.yaml', 'x\u007f.yaml', 'x\u0085.yaml', '\u001b[31mred.yaml']) {
      expect(() => checkNewFileName(p, 'FunctionFailed')).to.throw(FnrError, `invalid resource path ${escapeControl(p)}: it contains a control character`)
      expect(checkRelativePath(p, 'FunctionFailed')).to.equal(p)
    }
    expect(escapeControl('a\nb\u0085.yaml')).to.equal('"a\\nb\\u0085.yaml"')
    expect(() => checkNewFileName('ünïcode/ok.yaml', 'FunctionFailed')).to.not.throw()
    expect(checkRelativePath('ünïcode/ok.yaml', 'FunctionFailed')).to.equal('ünïcode/ok.yaml')
  })
})
