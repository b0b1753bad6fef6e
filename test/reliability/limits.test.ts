/**
 * Unit-level pins of the bounds the reliability suites added, next to the end-to-end cases that found them:
 * status messages and failure trailers stay small whatever a function prints, alias expansion
 * and nesting are bounded, large maps are read in linear time, and nothing is lost on the way
 * (a "__proto__" key, the comment above the first item of a ResourceList).
 */
import {expect} from 'chai'
import {parse} from 'yaml'

import {FnrError} from '../../src/lib/errors.js'
import {FAILURE_TRAILER, failureMetadata, readFailure, resultsMetadata} from '../../src/lib/grpc/metadata.js'
import {capStatusMessage, MAX_STATUS_MESSAGE_BYTES} from '../../src/lib/grpc/server.js'
import {functionFailedError} from '../../src/lib/process/failure.js'
import {readResults} from '../../src/lib/process/results.js'
import * as rl from '../../src/lib/resourcelist/index.js'
import {MAX_ALIAS_EXPANDED_NODES, toTyped} from '../../src/lib/resourcelist/yaml.js'
import {registerSummary, tally} from '../support/reliability/tally.js'

registerSummary()

function thrown(f: () => unknown): FnrError {
  try {
    f()
  } catch (err) {
    expect(err, String(err)).to.be.instanceOf(FnrError)
    return err as FnrError
  }
  return expect.fail('expected an FnrError')
}

function bomb(levels: number, fan: number, extra = ''): string {
  const lines = ['apiVersion: v1', 'kind: ConfigMap', 'metadata:', '  name: bomb', extra, 'data:', '  l0: &l0 [lol]'].filter((l) => l !== '')
  for (let i = 1; i <= levels; i++) lines.push(`  l${i}: &l${i} [${Array.from({length: fan}, () => `*l${i - 1}`).join(', ')}]`)
  return `${lines.join('\n')}\n`
}

describe('reliability: limits', () => {
  describe('gRPC status messages and trailers', () => {
    it('leaves short messages alone and cuts long ones to the limit, saying so', () => {
      expect(capStatusMessage('function "x" not found')).to.equal('function "x" not found')
      for (const unit of ['x', 'é', '😀', 'x😀']) {
        const long = unit.repeat(100_000)
        const cut = capStatusMessage(long)
        expect(Buffer.byteLength(cut), unit).to.be.at.most(MAX_STATUS_MESSAGE_BYTES)
        expect(cut).to.match(/… \(\d+ more bytes left out\)$/)
        expect(cut, 'no half surrogate pair').to.not.match(/[\ud800-\udbff](?![\udc00-\udfff])/)
      }
    })

    it('keeps the failure trailer under 6 KiB for 20,000 results, with the first ones and truncated set', () => {
      const results = Array.from({length: 20_000}, (_, i) => ({message: `result ${i}`, severity: 'error'}))
      // well-formed, only big: a control, not a bad input
      tally.tried('limits', {failureResults: results.map((r) => r.message)}, {valid: true})
      for (const md of [failureMetadata({exitCode: 1, signal: null, results, stderrTail: 'e'.repeat(4096), truncated: false}), resultsMetadata(results)]) {
        const raw = md.get(FAILURE_TRAILER)[0] as Buffer
        expect(raw.length).to.be.at.most(6 * 1024)
        const f = readFailure(md)!
        expect(f.truncated).to.equal(true)
        expect(f.results.length).to.be.greaterThan(10)
        expect(f.results[0]!.message).to.equal('result 0')
      }
    })

    it('cuts each error result in a failure message, so one huge result cannot hide the rest', async () => {
      const stdout = Buffer.from(`apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\nresults:\n- {severity: error, message: ${'x'.repeat(300_000)}}\n- {severity: error, message: second}\n`)
      tally.tried('limits', {functionOutput: stdout}, {valid: true})
      const e = await functionFailedError('example.com/fn:v1', {stdout, stderr: Buffer.from('the stderr tail\n'), exitCode: 1, signal: null, stderrTruncated: false, durationMs: 1})
      expect(e.message.length).to.be.below(MAX_STATUS_MESSAGE_BYTES)
      expect(e.message).to.contain('[error]: second')
      expect(e.message).to.contain('the stderr tail')
    })

    it('reads results holding a map of 15,000 keys (the duplicate-key check was quadratic)', async () => {
      // 15,000 keys stay under RESULT_LIMITS.maxParseBytes (process/results.ts); more are left out, saying so
      const out = `apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\nresults:\n- message: found\n  tags:\n${Array.from({length: 15_000}, (_, i) => `    k${i}: v\n`).join('')}`
      tally.tried('limits', {functionOutput: Buffer.from(out)}, {valid: true})
      const results = await readResults(Buffer.from(out))
      expect(results.map((r) => r.message)).to.deep.equal(['found'])
      expect(Object.keys(results[0]!.tags!)).to.have.length(15_000)
    })
    it('reads only the results of an output when it can (the items may be huge or not parseable into values)', async () => {
      const bombItems = `items:\n- a0: &a0 [x]\n${[1, 2, 3, 4].map((i) => `  a${i}: &a${i} [${Array.from({length: 10}, () => `*a${i - 1}`).join(', ')}]`).join('\n')}\nresults:\n- message: found\n  severity: error\n`
      const shapes: Record<string, string> = {
        'after items that cannot be expanded': bombItems,
        'compact list': 'apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\nresults:\n- message: found\n# a comment\n\n- message: second\n',
        'wide list before items': 'kind: ResourceList\nresults:\n  - message: found\n  - message: second\nitems:\n- a: 1\n',
        'legacy items form': 'kind: ResourceList\nresults:\n  items:\n  - message: found\n  - message: second\n',
        'flow style': '{kind: ResourceList, results: [{message: found}, {message: second}]}',
        JSON: '{"kind": "ResourceList", "results": [{"message": "found"}, {"message": "second"}]}',
        'alias into the items': 'items:\n- &r {message: found}\nresults:\n- *r\n- message: second\n',
        'CRLF line ends': 'kind: ResourceList\r\nresults:\r\n- message: found\r\n- message: second\r\nitems: []\r\n',
      }
      // the alias bomb is a bad input; the other shapes are valid outputs (controls)
      for (const [shape, text] of Object.entries(shapes)) tally.tried('limits', {functionOutput: Buffer.from(text)}, {valid: shape !== 'after items that cannot be expanded'})
      for (const [shape, text] of Object.entries(shapes)) {
        const messages = (await readResults(Buffer.from(text))).map((r) => r.message)
        expect(messages, shape).to.deep.equal(shape === 'after items that cannot be expanded' ? ['found'] : ['found', 'second'])
      }
    })
  })

  describe('ResourceList reader and writer', () => {
    it('refuses to expand alias bombs into plain values, and expands ordinary aliases', () => {
      tally.tried('limits', {resourceList: bomb(9, 10)})
      const node = rl.parseResourceList(bomb(9, 10)).items[0]!
      expect(thrown(() => toTyped(node)).message).to.contain(`YAML aliases expand to more than ${MAX_ALIAS_EXPANDED_NODES} nodes`)
      const small = toTyped(rl.parseResourceList(bomb(2, 3)).items[0]!) as {data: {l2: unknown}}
      expect(small.data.l2).to.deep.equal(Array.from({length: 3}, () => Array.from({length: 3}, () => ['lol'])))
    })

    it('refuses an alias bomb written to a .json file with a clear error', () => {
      const list = rl.parseResourceList(bomb(9, 10, '  annotations:\n    config.kubernetes.io/path: bomb.json'))
      expect(thrown(() => rl.renderPackageFiles(list.items, 'InvalidArgument')).kind).to.equal('InvalidArgument')
    })

    it('keeps a "__proto__" key when writing JSON', () => {
      const list = rl.parseResourceList('apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: p\n  annotations:\n    config.kubernetes.io/path: p.json\ndata:\n  __proto__: {polluted: "yes"}\n  plain: x\n')
      const json = JSON.parse(rl.renderPackageFiles(list.items, 'InvalidArgument').get('p.json')!) as {data: Record<string, unknown>}
      expect(Object.keys(json.data)).to.deep.equal(['__proto__', 'plain'])
      expect(({} as Record<string, unknown>).polluted).to.equal(undefined)
    })

    it('turns too-deep nesting into an FnrError (JSON input used to throw a RangeError)', () => {
      const deep = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":${'{"a":'.repeat(20_000)}1${'}'.repeat(20_000)}}`
      tally.tried('limits', {resourceList: deep})
      const e = thrown(() => rl.parseResourceList(deep))
      expect(e.kind).to.equal('InvalidArgument')
      expect(e.message).to.match(/nested too deeply/)
    })

    it('finds duplicate keys in linear time, anywhere in a document', () => {
      const many = `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: m\ndata:\n${Array.from({length: 20_000}, (_, i) => `  k${i}: v\n`).join('')}`
      tally.tried('limits', {resourceList: `${many}  k5: again\n`})
      expect(rl.parseResourceList(many).items).to.have.length(1)
      expect(thrown(() => rl.parseResourceList(`${many}  k5: again\n`)).message).to.match(/Map keys must be unique; "k5" is repeated/)
      expect(thrown(() => rl.parseResourceList('a:\n  - {b: 1, "b": 2}\n')).message).to.match(/"b" is repeated/)
    })

    it('keeps the comment above the first item of a ResourceList, like kpt', () => {
      const text = 'apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n# first\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a\n# second\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: b\n'
      const out = rl.stringifyResourceList(rl.parseResourceList(text).items)
      expect(out).to.contain('# first')
      expect(out).to.contain('# second')
      expect((parse(out) as {items: unknown[]}).items).to.have.length(2)
    })
  })
})
