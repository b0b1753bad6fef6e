/**
 * Reading results from a function's output stays bounded whatever the output (docs/process.md):
 * large lists, deep nesting, long blank runs and many aliases finish with bounded heap growth,
 * at most RESULT_LIMITS.maxResults results, and a sentence saying what was left out. The bounds
 * asserted are on work done (results read, heap growth), never on wall-clock time.
 */
import {expect} from 'chai'
import fc from 'fast-check'

import {looksLikeResourceList} from '../../src/lib/evaluators/entrypoint.js'
import {functionFailedError} from '../../src/lib/process/failure.js'
import {readResults, readResultsReport, RESULT_LIMITS} from '../../src/lib/process/results.js'

const HEADER = 'apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\nresults:\n'
const RESULT =
  '- message: "replicas must be at most 3"\n  severity: error\n' +
  '  resourceRef: {apiVersion: apps/v1, kind: Deployment, name: web, namespace: prod}\n  field: {path: spec.replicas}\n'

/** Heap growth (MB) across an async call; the result of the call is kept alive until measured. */
async function heapGrowth<T>(f: () => Promise<T>): Promise<{value: T; mb: number}> {
  const before = process.memoryUsage().heapUsed
  const value = await f()
  return {value, mb: (process.memoryUsage().heapUsed - before) / 1e6}
}

function failed(stdout: string) {
  return functionFailedError('example.com/fn:v1', {stdout: Buffer.from(stdout), stderr: Buffer.from('boom\n'), exitCode: 1, signal: null, stderrTruncated: false, durationMs: 1})
}

describe('process/results: bounded reading of hostile function output', function () {
  // Generous: the machine running the suite may be loaded; the assertions are on work, not time.
  this.timeout(120_000)

  it('3 MB of "- a" lines: counts them, reads none past the limit, says so, heap growth bounded', async () => {
    const {value: report, mb} = await heapGrowth(() => readResultsReport(Buffer.from(HEADER + '- a\n'.repeat(750_000))))
    expect(report.results).to.deep.equal([])
    expect(report.cuts).to.deep.equal([`read ${RESULT_LIMITS.maxResults} of 750000 results (the limit is ${RESULT_LIMITS.maxResults})`])
    expect(mb).to.be.below(150) // before the limits: ~640 MB
  })

  it('6 MB of structured results: reads the first maxResults, says how many there were, and the failure says so too', async () => {
    const stdout = HEADER + RESULT.repeat(50_000)
    const {value: e, mb} = await heapGrowth(() => failed(stdout))
    const failure = e.details.failure as {results: unknown[]; truncated: boolean; resultsCut: string[]}
    expect(failure.results).to.have.length(RESULT_LIMITS.maxResults)
    expect(failure.truncated).to.equal(true)
    expect(failure.resultsCut).to.deep.equal([`read ${RESULT_LIMITS.maxResults} of 50000 results (the limit is ${RESULT_LIMITS.maxResults})`])
    expect(e.message).to.contain(`results left out: read ${RESULT_LIMITS.maxResults} of 50000 results`)
    expect(e.message).to.contain('[error] apps/v1/Deployment/prod/web spec.replicas: replicas must be at most 3')
    expect(mb).to.be.below(150) // before: ~430 MB
  })

  it('leaves out a result larger than what is left of maxParseBytes, reads the next ones, and says so', async () => {
    const big = `- message: big\n  severity: error\n  tags:\n${Array.from({length: 45_000}, (_, i) => `    k${i}: v\n`).join('')}`
    const report = await readResultsReport(Buffer.from(`${HEADER}- message: first\n${big}- message: last\n`))
    expect(report.results.map((r) => r.message)).to.deep.equal(['first', 'last'])
    expect(report.cuts).to.deep.equal([`1 result(s) left out: results are read up to ${RESULT_LIMITS.maxParseBytes} bytes in all`])
  })

  it('flow nesting 100,000 deep, in a large and in a small section: left out, saying so, no stack overflow', async () => {
    const deep = `${'['.repeat(100_000)}${']'.repeat(100_000)}`
    const large = await readResultsReport(Buffer.from(`${HEADER}- message: ok\n- message: deep\n  tags: ${deep}\n`))
    expect(large.results.map((r) => r.message)).to.deep.equal(['ok'])
    expect(large.cuts).to.deep.equal([`1 result(s) left out: nested deeper than ${RESULT_LIMITS.maxFlowDepth} levels`])
    const small = await readResultsReport(Buffer.from(`${HEADER}- message: deep\n  tags: ${'['.repeat(100)}${']'.repeat(100)}\n`))
    expect(small.results).to.deep.equal([])
    expect(small.cuts).to.deep.equal([`results not read: nested deeper than ${RESULT_LIMITS.maxFlowDepth} levels`])
    // JSON is parsed by V8's iterative parser; the values kept are cut to a bounded depth
    const json = await readResultsReport(Buffer.from(`{"kind":"ResourceList","results":[{"message":"m","field":{"path":"p","currentValue":${deep}},"tags":{"t":${deep}}}]}`))
    expect(json.results[0]!.message).to.equal('m')
    expect(JSON.stringify(json.results).length).to.be.below(10_000)
  })

  it('a 1 MB run of blank lines inside the results: both results read', async () => {
    const {value, mb} = await heapGrowth(() => readResults(Buffer.from(`${HEADER}- message: a\n${'\n'.repeat(1_000_000)}- message: b\n`)))
    expect(value.map((r) => r.message)).to.deep.equal(['a', 'b'])
    expect(mb).to.be.below(100)
  })

  it('100,000 aliases to one anchor: the anchored result is read, the others are said to be unreadable', async () => {
    const report = await readResultsReport(Buffer.from(`${HEADER}- &r {message: a, severity: error}\n${'- *r\n'.repeat(100_000)}`))
    expect(report.results.map((r) => r.message)).to.deep.equal(['a'])
    expect(report.cuts).to.include(`read ${RESULT_LIMITS.maxResults} of 100001 results (the limit is ${RESULT_LIMITS.maxResults})`)
    expect(report.cuts.some((c) => /result\(s\) could not be read on their own/.test(c))).to.equal(true)
  })

  it('keeps the legacy {items: [...]} form and indented lists when reading entry by entry', async () => {
    const legacy = `kind: ResourceList\nresults:\n  items:\n${'  - message: x\n'.repeat(20_000)}  - message: last\nitems: []\n`
    const report = await readResultsReport(Buffer.from(legacy))
    expect(report.results).to.have.length(RESULT_LIMITS.maxResults)
    expect(report.cuts).to.deep.equal([`read ${RESULT_LIMITS.maxResults} of 20001 results (the limit is ${RESULT_LIMITS.maxResults})`])
  })

  it('property: any mix of pathological fragments is read without throwing, within the limits, into plain bounded values', async () => {
    const fragment = fc.oneof(
      fc.constant('- a\n'),
      fc.constant(RESULT),
      fc.nat({max: 5000}).map((n) => '\n'.repeat(n)),
      fc.nat({max: 5000}).map((n) => ' '.repeat(n) + '\n'),
      fc.nat({max: 3000}).map((n) => `- message: deep\n  tags: ${'['.repeat(n)}${']'.repeat(n)}\n`),
      fc.nat({max: 3000}).map((n) => `- message: open\n  tags: ${'{'.repeat(n)}\n`),
      fc.constant('- &a {message: anchored, severity: error}\n'),
      fc.nat({max: 200}).map((n) => '- *a\n'.repeat(n)),
      fc.nat({max: 300}).map((n) => Array.from({length: n}, (_, i) => `${' '.repeat(i)}- k:\n`).join('')),
      fc.constant('- message: |\n    block\n\n\n    scalar\n'),
      fc.constant('---\n'),
      fc.constant('items:\n- x\n'),
      fc.string({maxLength: 200}),
    )
    await fc.assert(
      fc.asyncProperty(fc.array(fragment, {maxLength: 40}), fc.boolean(), async (parts, header) => {
        const text = (header ? HEADER : 'results:\n') + parts.join('')
        const report = await readResultsReport(Buffer.from(text))
        expect(report.results.length).to.be.at.most(RESULT_LIMITS.maxResults)
        for (const r of report.results) expect(typeof r.message).to.equal('string')
        expect(JSON.stringify(report.results).length).to.be.below(RESULT_LIMITS.maxParseBytes * 20)
        expect(looksLikeResourceList(Buffer.from(text))).to.equal(header || /kind: ResourceList/.test(text))
      }),
      {numRuns: 40},
    )
  })
})

describe('the wrapper\'s ResourceList check (looksLikeResourceList)', () => {
  const reference = (t: string): boolean => /(^|[\n{,])\s*["']?kind["']?\s*:\s*["']?ResourceList\b/.test(t)

  it('answers as the former regex on short texts (property)', () => {
    const piece = fc.constantFrom('kind', 'ResourceList', ':', ' ', '\n', '\t', '"', "'", '{', ',', 'x', '-', 'ResourceLists', '\r\n')
    fc.assert(fc.property(fc.array(piece, {maxLength: 14}).map((p) => p.join('')), (t) => {
      expect(looksLikeResourceList(Buffer.from(t)), JSON.stringify(t)).to.equal(reference(t))
    }), {numRuns: 3000})
  })

  it('reads a 2 MB run of blank lines in one pass (the regex took 9.5 s on 100 KB)', () => {
    // each character is read a bounded number of times: 2 MB finishes in well under the test timeout
    expect(looksLikeResourceList(Buffer.from(`x: 1\n${'\n'.repeat(2_000_000)}kind: ResourceList\n`))).to.equal(true)
    expect(looksLikeResourceList(Buffer.from(`x: 1\n${'\n  '.repeat(1_000_000)}y: 2\n`))).to.equal(false)
  })
})
