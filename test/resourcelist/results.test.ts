import {chmodSync, readFileSync, writeFileSync} from 'node:fs'
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
  stringifyFunctionResultList,
  writeResultsFile,
  type FunctionResult,
} from '../../src/lib/resourcelist/index.js'
import {goYaml} from '../../src/lib/resourcelist/goyaml.js'
import {kpt, Scratch} from './helpers.js'

const ITEM = `- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: cfg
    namespace: ns
    annotations:
      config.kubernetes.io/index: '0'
      config.kubernetes.io/path: 'cm.yaml'
      internal.config.kubernetes.io/index: '0'
      internal.config.kubernetes.io/path: 'cm.yaml'
`

/** Results with the awkward strings go-yaml quotes in different ways. */
const RESULTS = `results:
- message: no ref no sev
- message: with ref
  severity: error
  resourceRef: {apiVersion: v1, kind: ConfigMap, name: cfg, namespace: ns}
  field: {path: data.key, currentValue: 5, proposedValue: {b: 1, a: [x, "y", 2.5, true, null]}}
  file: {path: cm.yaml, index: 0}
  tags: {z: "1", a: b}
- message: "\`data.namespace\` should not be empty"
  severity: warning
  resourceRef: {apiVersion: v1, kind: ConfigMap, metadata: {name: legacy, namespace: lns}}
- message: "a: b"
  file: {path: x.yaml, index: 3}
- message: "- dash"
  field: {path: p, currentValue: "5", proposedValue: ""}
- message: "#hash and x #y"
- message: "yes"
- message: "5"
- message: ""
  severity: info
- message: " leading and trailing "
- message: "tab\\there"
- message: "multi\\nline"
- message: "multi\\nline\\n"
- message: "multi \\nspace"
- message: "\\nleading break"
- message: "é ü 😀"
- message: "'single' \\"double\\""
- message: "2001-12-14"
- message: "1:20"
- message: "null"
- message: "~"
- message: "key: |"
- message: "[x] {y}"
- message: "ends:"
- message: "@at"
- message: "---"
- message: "true"
- message: "0x1F"
- message: "1e3"
- message: "line\\r\\nwindows"
- message: "bell\\u0007"
  severity: bogus
  field: {currentValue: {}, proposedValue: []}
`

describe('resourcelist results', () => {
  const scratch = new Scratch()
  after(() => scratch.cleanup())

  function resultsFunction(body: string, stderr = '', exit = 0): string {
    const fn = join(scratch.root, `results-${Math.random().toString(36).slice(2)}.sh`)
    writeFileSync(
      fn,
      `#!/bin/sh\ncat > /dev/null\ncat <<'OUT'\napiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n${ITEM}${body}OUT\n${stderr ? `printf '%s' '${stderr}' >&2\n` : ''}exit ${exit}\n`,
    )
    chmodSync(fn, 0o755)
    return fn
  }

  function runKpt(fn: string, truncate = true) {
    const pkg = scratch.tree({'cm.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\n  namespace: ns\n'})
    const dir = scratch.path('results')
    const args = ['fn', 'eval', pkg, '--exec', fn, '--results-dir', dir]
    if (!truncate) args.push('--truncate-output=false')
    const r = kpt(args)
    return {...r, results: readFileSync(join(dir, 'results.yaml'), 'utf8')}
  }

  describe('interop with kpt', () => {
    it('writes results.yaml byte for byte like kpt, and prints the same Results block', () => {
      const stderr = 'line one\nline "two"\ttab\n'
      const fn = resultsFunction(RESULTS, stderr)
      const k = runKpt(fn)
      expect(k.status, k.stderr).to.equal(0)
      const results = extractResults(parseResourceList(`apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n${ITEM}${RESULTS}`))
      const list = buildFunctionResultList([{exec: fn, stderr, exitCode: 0, results}], 0)
      expect(stringifyFunctionResultList(list)).to.equal(k.results)
      expect(k.stderr).to.include(formatResultsBlock(results) + formatStderrBlock(stderr))
      const full = runKpt(fn, false)
      expect(full.stderr).to.include(formatResultsBlock(results, {truncate: false}) + formatStderrBlock(stderr, {truncate: false}))
    })

    it('records a failing function like kpt (exit code, stderr, results)', () => {
      const fn = resultsFunction('results:\n- message: boom\n  severity: error\n', 'fatal: boom\n', 2)
      const k = runKpt(fn)
      expect(k.status).to.equal(1)
      const list = buildFunctionResultList([{exec: fn, stderr: 'fatal: boom\n', exitCode: 2, results: [{message: 'boom', severity: 'error'}]}], 1)
      expect(stringifyFunctionResultList(list)).to.equal(k.results)
      expect(k.stderr).to.include(`${formatResultsBlock([{message: 'boom', severity: 'error'}])}  Stderr:\n    "fatal: boom"\n    ""\n  Exit code: 2\n`)
    })

    it('writes a run without results like kpt', () => {
      const fn = resultsFunction('')
      const k = runKpt(fn)
      expect(stringifyFunctionResultList(buildFunctionResultList([{exec: fn, exitCode: 0}], 0))).to.equal(k.results)
      expect(stringifyFunctionResultList(buildFunctionResultList([], 0))).to.equal(
        'apiVersion: kpt.dev/v1\nkind: FunctionResultList\nmetadata:\n  name: fnresults\nexitCode: 0\n',
      )
    })
  })

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
