import {chmodSync, readFileSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'

import {expect} from 'chai'

import {
  buildFunctionResultList,
  extractResults,
  formatResultsBlock,
  formatStderrBlock,
  parseResourceList,
  stringifyFunctionResultList,
} from '../../src/lib/resourcelist/index.js'
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
})
