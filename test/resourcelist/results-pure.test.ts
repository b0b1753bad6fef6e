/**
 * src/lib/resourcelist/results.ts, in process: reading results out of a function's output (the
 * shapes kpt accepts, its errors), the console blocks and durations kpt prints, container stderr,
 * Go's %q, and writing results.yaml. test/resourcelist/results.test.ts compares the texts with
 * kpt's own (it runs kpt); these are the cases that need no kpt.
 */
import {mkdir, mkdtemp, readFile, rm, writeFile} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'

import {expect} from 'chai'
import {parseDocument, type Node} from 'yaml'

import {FnrError} from '../../src/lib/errors.js'
import {parseResourceList} from '../../src/lib/resourcelist/read.js'
import {
  buildFunctionResultList,
  containerStderr,
  extractResults,
  formatKptDuration,
  formatResultsBlock,
  formatStderrBlock,
  goQuote,
  stringifyFunctionResultList,
  writeResultsFile,
} from '../../src/lib/resourcelist/results.js'
import {PARSE_OPTIONS} from '../../src/lib/resourcelist/yaml.js'

const rl = (results: string) => parseResourceList(`apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n${results}`)
const node = (text: string): Node => parseDocument(text, PARSE_OPTIONS).contents as Node

function failure(f: () => unknown): FnrError {
  try {
    f()
  } catch (err) {
    expect(err).to.be.instanceOf(FnrError)
    return err as FnrError
  }
  throw new Error('expected an error')
}

describe('resourcelist/results: extractResults', () => {
  it('reads a results node given directly, as well as a ResourceList', () => {
    expect(extractResults(node('- message: a\n- message: b\n  severity: warning\n'))).to.deep.equal([{message: 'a'}, {message: 'b', severity: 'warning'}])
    expect(extractResults(undefined)).to.deep.equal([])
  })

  it('has no results for an empty results field, null, an empty list or an empty map (kpt passes these)', () => {
    for (const text of ['results:\n', 'results: []\n', 'results: {}\n', 'results: ~\n', 'results: null\n', 'results: NULL\n', 'results: !!null x\n']) {
      expect(extractResults(rl(text)), text).to.deep.equal([])
    }
  })

  it('fails the function (FunctionFailed) on a results field that is not a list, in kpt\'s words', () => {
    // an empty legacy wrapping fails in kpt too ("cannot unmarshal")
    for (const text of ['results: 5\n', 'results: {a: 1}\n', 'results: {items: x}\n', 'results: {items: []}\n', 'results: "null"\n']) {
      const err = failure(() => extractResults(rl(text)))
      expect(err.kind, text).to.equal('FunctionFailed')
      expect(err.message, text).to.equal('function results must be a list')
    }
    const item = failure(() => extractResults(rl('results:\n- message: ok\n- [x]\n')))
    expect(item.kind).to.equal('FunctionFailed')
    expect(item.message).to.equal('function results[1] must be a mapping')
  })

  it('reads a null message as "" and drops empty severity and reference fields', () => {
    expect(extractResults(rl('results:\n- message: ~\n  severity: ""\n  resourceRef: {apiVersion: "", kind: ~, name: n}\n'))).to.deep.equal([
      {message: '', resourceRef: {name: 'n'}},
    ])
    expect(extractResults(rl('results:\n- severity: error\n'))).to.deep.equal([{message: '', severity: 'error'}])
  })

  it('keeps a severity kpt does not know as written', () => {
    expect(extractResults(rl('results:\n- message: m\n  severity: Fatal\n'))[0]!.severity).to.equal('Fatal')
  })

  it('prefers the legacy metadata name and namespace over the flat ones', () => {
    const [r] = extractResults(rl('results:\n- message: m\n  resourceRef: {kind: K, name: flat, namespace: flatns, metadata: {name: meta, namespace: metans}}\n'))
    expect(r!.resourceRef).to.deep.equal({kind: 'K', name: 'meta', namespace: 'metans'})
  })

  it('reads file.path and file.index, and refuses an index that is not an integer', () => {
    expect(extractResults(rl('results:\n- message: m\n  file: {path: a/b.yaml, index: 2}\n'))[0]!.file).to.deep.equal({path: 'a/b.yaml', index: 2})
    expect(extractResults(rl('results:\n- message: m\n  file: {}\n'))[0]!.file).to.deep.equal({})
    const err = failure(() => extractResults(rl('results:\n- message: ok\n- message: m\n  file: {index: 1.5}\n')))
    expect(err.kind).to.equal('FunctionFailed')
    expect(err.message).to.equal('function results[1]: file.index must be an integer')
    expect(() => extractResults(rl('results:\n- message: m\n  file: {index: x}\n'))).to.throw(FnrError, 'file.index must be an integer')
  })

  it('reads tags as strings, a null tag as ""', () => {
    expect(extractResults(rl('results:\n- message: m\n  tags: {a: 1, b: ~, c: x}\n'))[0]!.tags).to.deep.equal({a: '1', b: '', c: 'x'})
  })
})

describe('resourcelist/results: console blocks', () => {
  it('puts a multi-line result on one line', () => {
    expect(formatResultsBlock([{message: 'a\nb'}])).to.equal('  Results:\n    [info]: a b\n')
  })

  it('shows exactly 4 lines without a truncation note', () => {
    const four = Array.from({length: 4}, (_, i) => ({message: `r${i}`}))
    expect(formatResultsBlock(four)).not.to.include('truncated')
    expect(formatResultsBlock([...four, {message: 'r4'}])).to.include("    ...(1 line(s) truncated, use '--truncate-output=false' to disable)\n")
  })

  it('quotes each stderr line, the one after a final newline too', () => {
    expect(formatStderrBlock('one')).to.equal('  Stderr:\n    "one"\n')
    expect(formatStderrBlock('\n')).to.equal('  Stderr:\n    ""\n    ""\n')
    expect(formatStderrBlock('1\n2\n3\n4\n5\n6')).to.equal(`  Stderr:\n    "1"\n    "2"\n    "3"\n    "4"\n    ...(2 line(s) truncated, use '--truncate-output=false' to disable)\n`)
  })
})

describe('resourcelist/results: goQuote (Go %q)', () => {
  it('escapes quotes, backslashes and the C escapes', () => {
    expect(goQuote('a"b\\c')).to.equal('"a\\"b\\\\c"')
    expect(goQuote('\x07\b\f\n\r\t\v')).to.equal('"\\a\\b\\f\\n\\r\\t\\v"')
  })

  it('escapes what Go does not print, in lower-case hex, and keeps printable Unicode', () => {
    expect(goQuote('\x00\x1b\x7f')).to.equal('"\\x00\\x1b\\x7f"')
    expect(goQuote('\u00a0\u200b\u2028\ue000')).to.equal('"\\u00a0\\u200b\\u2028\\ue000"')
    expect(goQuote('\u{e0001}')).to.equal('"\\U000e0001"')
    expect(goQuote('é ü 😀 中')).to.equal('"é ü 😀 中"')
    expect(goQuote('')).to.equal('""')
  })
})

describe('resourcelist/results: durations and container stderr', () => {
  it('prints durations as Go\'s time.Duration truncated to 100 ms', () => {
    const cases: Array<[number, string]> = [[-5, '0s'], [100, '100ms'], [999, '900ms'], [59_999, '59.9s'], [60_000, '1m0s'], [3_600_000, '1h0m0s'], [7_384_500, '2h3m4.5s']]
    for (const [ms, want] of cases) expect(formatKptDuration(ms), String(ms)).to.equal(want)
  })

  it('keeps container stderr as kpt reads it line by line: no final newline, no \\r at line ends', () => {
    expect(containerStderr('')).to.equal('')
    expect(containerStderr('x')).to.equal('x')
    expect(containerStderr('a\r\nb\r\n')).to.equal('a\nb')
    expect(containerStderr('a\n\n')).to.equal('a\n')
    expect(containerStderr('a\rb\n')).to.equal('a\rb')
    expect(containerStderr('\n')).to.equal('')
  })
})

describe('resourcelist/results: results.yaml', () => {
  it('leaves out empty fields as Go\'s omitempty does, an index of 0 too', () => {
    const list = buildFunctionResultList(
      [
        {
          image: 'example.com/fn:v1',
          exec: '',
          stderr: '',
          exitCode: 1,
          results: [{message: 'm', severity: 'error', resourceRef: {kind: 'K', name: ''}, field: {path: 'a.b', currentValue: null, proposedValue: 0}, file: {path: 'f.yaml', index: 0}, tags: {}}],
        },
      ],
      1,
    )
    expect(stringifyFunctionResultList(list)).to.equal(
      [
        'apiVersion: kpt.dev/v1',
        'kind: FunctionResultList',
        'metadata:',
        '  name: fnresults',
        'exitCode: 1',
        'items:',
        '  - image: example.com/fn:v1',
        '    exitCode: 1',
        '    results:',
        '      - message: m',
        '        severity: error',
        '        resourceRef:',
        '          kind: K',
        '        field:',
        '          path: a.b',
        '          proposedValue: 0',
        '        file:',
        '          path: f.yaml',
        '',
      ].join('\n'),
    )
  })

  it('builds the list kpt writes, copying the records', () => {
    const records = [{exec: 'fn', exitCode: 0}]
    const list = buildFunctionResultList(records, 0)
    expect(list).to.deep.equal({apiVersion: 'kpt.dev/v1', kind: 'FunctionResultList', metadata: {name: 'fnresults'}, exitCode: 0, items: [{exec: 'fn', exitCode: 0}]})
    records.push({exec: 'other', exitCode: 1})
    expect(list.items).to.have.length(1)
  })

  describe('writeResultsFile', () => {
    let root: string
    before(async () => {
      root = await mkdtemp(path.join(os.tmpdir(), 'fnr-results-unit-'))
    })
    after(() => rm(root, {recursive: true, force: true}))
    const list = buildFunctionResultList([], 0)

    it('creates the directory and writes results.yaml', async () => {
      const dir = path.join(root, 'a', 'b')
      const file = await writeResultsFile(dir, list)
      expect(file).to.equal(path.join(dir, 'results.yaml'))
      expect(await readFile(file, 'utf8')).to.equal(stringifyFunctionResultList(list))
    })

    it('says "not a directory" (InvalidArgument) for a file where the directory should be, or above it', async () => {
      const file = path.join(root, 'plain')
      await writeFile(file, 'x')
      for (const dir of [file, path.join(file, 'sub')]) {
        let err: unknown
        try {
          await writeResultsFile(dir, list)
        } catch (e) {
          err = e
        }
        expect(err, dir).to.be.instanceOf(FnrError)
        expect((err as FnrError).kind).to.equal('InvalidArgument')
        expect((err as FnrError).message).to.equal(`cannot write results to ${dir}: not a directory`)
      }
    })

    it('says so when results.yaml is a directory', async () => {
      const dir = path.join(root, 'taken')
      await mkdir(path.join(dir, 'results.yaml'), {recursive: true})
      let err: unknown
      try {
        await writeResultsFile(dir, list)
      } catch (e) {
        err = e
      }
      expect((err as FnrError).kind).to.equal('InvalidArgument')
      expect((err as FnrError).message).to.equal(`cannot write results to ${dir}: ${path.join(dir, 'results.yaml')} is a directory`)
    })
  })
})
