/** Results read from a ResourceList, formatted and encoded as kpt does (src/lib/resourcelist/results.ts): in process. Compared with kpt itself in ./results.test.ts. */
import {readFileSync} from 'node:fs'
import {join} from 'node:path'

import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import {
  buildFunctionResultList,
  countErrorResults,
  extractResults,
  formatKptDuration,
  formatResult,
  formatResultsBlock,
  formatStderrBlock,
  parseResourceList,
  writeResultsFile,
  type FunctionResult,
} from '../../src/lib/resourcelist/index.js'
import {goYaml} from '../../src/lib/resourcelist/goyaml.js'
import {Scratch} from './helpers.js'

describe('resourcelist results', () => {
  const scratch = new Scratch()
  after(() => scratch.cleanup())

  describe('extracting', () => {
    const rl = (results: string) => parseResourceList(`apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n${results}`)

    it('reads the list form, the legacy {items} form and legacy resourceRef.metadata', () => {
      const list = extractResults(rl('results:\n- message: a\n  severity: error\n'))
      const legacy = extractResults(rl('results:\n  items:\n  - message: a\n    severity: error\n'))
      expect(list).to.deep.equal([{message: 'a', severity: 'error'}])
      expect(legacy).to.deep.equal(list)
      const ref = extractResults(rl("results:\n- message: m\n  resourceRef:\n    apiVersion: v1\n    kind: K\n    metadata:\n      name: ' n '\n      namespace: \"''\"\n"))
      expect(ref[0]!.resourceRef).to.deep.equal({apiVersion: 'v1', kind: 'K', name: 'n'})
    })

    it('maps field.suggestedValue to proposedValue and types values like go-yaml', () => {
      const r = extractResults(rl('results:\n- message: m\n  field:\n    path: a.b\n    currentValue: "5"\n    suggestedValue: [1, 0x10, 1.5, true, ~, x]\n'))
      expect(r[0]!.field).to.deep.equal({path: 'a.b', currentValue: '5', proposedValue: [1, 16, 1.5, true, null, 'x']})
    })

    it('returns no results when there are none, and fails on a malformed results field', () => {
      expect(extractResults(rl(''))).to.deep.equal([])
      expect(extractResults(rl('results: []\n'))).to.deep.equal([])
      expect(extractResults(null)).to.deep.equal([])
      expect(() => extractResults(rl('results: oops\n'))).to.throw(FnrError, 'function results must be a list')
      expect(() => extractResults(rl('results:\n- just a string\n'))).to.throw(FnrError, 'function results[0] must be a mapping')
    })

    it('counts only severity error as an error result', () => {
      const rs: FunctionResult[] = [{message: 'a', severity: 'error'}, {message: 'b'}, {message: 'c', severity: 'warning'}, {message: 'd', severity: 'error'}]
      expect(countErrorResults(rs)).to.equal(2)
    })
  })

  describe('formatting', () => {
    it('prints results like kpt beta.56', () => {
      expect(formatResult({message: 'm'})).to.equal('[info]: m')
      expect(formatResult({message: 'm', severity: 'error', resourceRef: {apiVersion: 'v1', kind: 'ConfigMap', name: 'cfg'}, field: {path: 'data.key'}})).to.equal(
        '[error] v1/ConfigMap/cfg data.key: m',
      )
      expect(formatResult({message: 'm', severity: 'warning', resourceRef: {apiVersion: 'apps/v1', kind: 'Deployment', namespace: 'prod', name: 'web'}})).to.equal(
        '[warning] apps/v1/Deployment/prod/web: m',
      )
      expect(formatResult({message: 'm', field: {}})).to.equal('[info] : m')
    })

    it('truncates blocks after 4 lines and quotes stderr like Go', () => {
      const rs = Array.from({length: 6}, (_, i) => ({message: `r${i}`}))
      expect(formatResultsBlock(rs)).to.equal(
        "  Results:\n    [info]: r0\n    [info]: r1\n    [info]: r2\n    [info]: r3\n    ...(2 line(s) truncated, use '--truncate-output=false' to disable)\n",
      )
      expect(formatResultsBlock(rs, {truncate: false}).split('\n')).to.have.length(8)
      expect(formatResultsBlock([])).to.equal('')
      expect(formatStderrBlock('a\tb "c" \\ é \u0001\n')).to.equal('  Stderr:\n    "a\\tb \\"c\\" \\\\ é \\x01"\n    ""\n')
      expect(formatStderrBlock('')).to.equal('')
    })

    it('prints durations like kpt (truncated to 100 ms, Go format)', () => {
      const cases: Array<[number, string]> = [[0, '0s'], [99, '0s'], [250, '200ms'], [1000, '1s'], [1234, '1.2s'], [65_000, '1m5s'], [3_600_500, '1h0m0.5s']]
      for (const [ms, want] of cases) expect(formatKptDuration(ms)).to.equal(want)
    })

    it('writes results.yaml into the results directory', async () => {
      const dir = join(scratch.root, 'rd', 'nested')
      const file = await writeResultsFile(dir, buildFunctionResultList([{image: 'gcr.io/kpt-fn/x:v1', exitCode: 0}], 0))
      expect(readFileSync(file, 'utf8')).to.equal(
        'apiVersion: kpt.dev/v1\nkind: FunctionResultList\nmetadata:\n  name: fnresults\nexitCode: 0\nitems:\n  - image: gcr.io/kpt-fn/x:v1\n    exitCode: 0\n',
      )
    })
  })

  describe('go-yaml encoding', () => {
    it('quotes and formats scalars like go-yaml v3', () => {
      const cases: Array<[unknown, string]> = [
        ['plain', 'plain'],
        ['', '""'],
        ['5', '"5"'],
        ['yes', '"yes"'],
        ['a: b', "'a: b'"],
        ["it's: x", "'it''s: x'"],
        ['x\ty', '"x\\ty"'],
        ['a\nb', '|-\n  a\n  b'],
        ['a\tb\nc', '|-\n  a\tb\n  c'],
        ['a\nb\n', '|\n  a\n  b'],
        ['a\n\n', '|+\n  a\n'],
        [' a\nb', '|2-\n   a\n  b'],
        ['a \nb', '"a \\nb"'],
        [1.5, '1.5'],
        [1e21, '1e+21'],
        [0.00001, '1e-05'],
        [1234567.5, '1.2345675e+06'],
        [true, 'true'],
        [null, 'null'],
        [Number.NaN, '.nan'],
      ]
      for (const [value, want] of cases) expect(goYaml({k: value}), JSON.stringify(value)).to.equal(`k: ${want}\n`)
      expect(goYaml({b: [1, {q: 2, p: [], y: 1}], a: {}}, {wideSeq: true})).to.equal('a: {}\nb:\n  - 1\n  - p: []\n    q: 2\n    "y": 1\n')
      expect(goYaml({b: [[1, 2]]})).to.equal('b:\n- - 1\n  - 2\n')
    })
  })
})
