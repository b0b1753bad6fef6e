/**
 * src/lib/process/failure.ts: what a caller learns when a function fails (docs/process.md, "What
 * a failure says"): the exit code or signal, results errors first, results left out, the stderr
 * tail, all within FAILURE_MESSAGE_BUDGET; and the refusal of a function's empty output (an empty
 * output would delete every resource of the package).
 */
import {expect} from 'chai'

import {FAILURE_MESSAGE_BUDGET, emptyOutputError, functionFailedError, isBlank} from '../../src/lib/process/failure.js'
import type {FunctionProcessResult} from '../../src/lib/process/run.js'

const IMAGE = 'example.com/fn:v1'

function outcome(o: {stdout?: string; stderr?: string; exitCode?: number | null; signal?: NodeJS.Signals | null}): FunctionProcessResult {
  return {
    stdout: Buffer.from(o.stdout ?? ''),
    stderr: Buffer.from(o.stderr ?? ''),
    exitCode: o.exitCode === undefined ? 1 : o.exitCode,
    signal: o.signal ?? null,
    stderrTruncated: false,
    durationMs: 1,
  }
}

const list = (results: string) => `apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\nresults:\n${results}`

describe('process/failure: functionFailedError', () => {
  it('is FunctionFailed and says the exit code, the results and the stderr, in that order', async () => {
    const err = await functionFailedError(IMAGE, outcome({stdout: list('- message: too many replicas\n  severity: error\n'), stderr: 'fatal: boom\n', exitCode: 2}))
    expect(err.kind).to.equal('FunctionFailed')
    expect(err.message).to.equal('function "example.com/fn:v1" exited with code 2\nresults:\n[error]: too many replicas\nstderr:\nfatal: boom')
  })

  it('says the signal that killed the function, or "a signal"', async () => {
    expect((await functionFailedError(IMAGE, outcome({exitCode: null, signal: 'SIGKILL'}))).message).to.equal('function "example.com/fn:v1" was killed by SIGKILL')
    expect((await functionFailedError(IMAGE, outcome({exitCode: null}))).message).to.equal('function "example.com/fn:v1" was killed by a signal')
  })

  it('leaves out the results and stderr parts when there are none (blank stderr counts as none)', async () => {
    const err = await functionFailedError(IMAGE, outcome({stdout: 'not yaml at all: [', stderr: ' \n\t\n'}))
    expect(err.message).to.equal('function "example.com/fn:v1" exited with code 1')
  })

  it('puts error results first, then the others in their order, in kpt\'s format', async () => {
    const stdout = list(
      [
        '- message: note',
        '- message: careful',
        '  severity: warning',
        '- message: broken',
        '  severity: error',
        '  resourceRef: {apiVersion: v1, kind: ConfigMap, namespace: ns, name: cm}',
        '  field: {path: data.x}',
        '',
      ].join('\n'),
    )
    const err = await functionFailedError(IMAGE, outcome({stdout}))
    expect(err.message.split('\n')).to.deep.equal([
      'function "example.com/fn:v1" exited with code 1',
      'results:',
      '[error] v1/ConfigMap/ns/cm data.x: broken',
      '[info]: note',
      '[warning]: careful',
    ])
  })

  it('keeps the structured failure whole: exit code, signal, all results, the stderr tail, and the raw output', async () => {
    const stdout = list('- message: a\n  severity: error\n- message: b\n')
    const result = outcome({stdout, stderr: 'x'.repeat(5000) + 'END\n\n', exitCode: 3})
    const err = await functionFailedError(IMAGE, result)
    const failure = err.details.failure!
    expect(failure.exitCode).to.equal(3)
    expect(failure.signal).to.equal(null)
    expect(failure.results).to.deep.equal([{message: 'a', severity: 'error'}, {message: 'b'}])
    expect(failure.truncated).to.equal(false)
    expect(failure).not.to.have.property('resultsCut')
    // 4096 characters of the tail (trailing newlines trimmed), marked as cut
    expect(failure.stderrTail).to.equal('…' + ('x'.repeat(5000) + 'END').slice(-4096))
    expect(err.details.stdout).to.equal(result.stdout)
    expect(err.details.stderr).to.equal(result.stderr)
  })

  it('cuts one long result at 1 KiB in the message, and keeps it whole in the structure', async () => {
    const long = 'y'.repeat(3000)
    const err = await functionFailedError(IMAGE, outcome({stdout: list(`- message: ${long}\n  severity: error\n`)}))
    const line = err.message.split('\n')[2]!
    expect(line).to.equal(`[error]: ${long}`.slice(0, 1024) + '…')
    expect(err.details.failure?.results?.map((r) => r.message)).to.deep.equal([long])
  })

  it('stays within the budget with many results, says how many it left out, and keeps room for stderr', async () => {
    const stdout = list(Array.from({length: 120}, (_, i) => `- message: result number ${i} ${'z'.repeat(60)}\n  severity: error\n`).join(''))
    const stderr = 's'.repeat(10_000) + 'LAST'
    const err = await functionFailedError(IMAGE, outcome({stdout, stderr}))
    expect(err.message.length).to.be.at.most(FAILURE_MESSAGE_BUDGET)
    const more = /… and (\d+) more result\(s\)/.exec(err.message)
    expect(more, 'the "more" line').not.to.equal(null)
    const shown = err.message.split('\n').filter((l) => l.startsWith('[error]')).length
    expect(shown + Number(more![1])).to.equal(120)
    // the stderr part holds at least 2 KiB of the end of stderr
    const stderrPart = err.message.slice(err.message.indexOf('\nstderr:\n') + '\nstderr:\n'.length)
    expect(stderrPart.endsWith('LAST')).to.equal(true)
    expect(stderrPart.length).to.be.at.least(2048)
    expect(err.details.failure!.results).to.have.length(120)
  })

  it('gives stderr what the results leave, at least 1 KiB', async () => {
    const stderr = 'e'.repeat(20_000) + 'TAIL'
    const err = await functionFailedError(IMAGE, outcome({stderr}))
    expect(err.message.length).to.be.at.most(FAILURE_MESSAGE_BUDGET)
    expect(err.message.length).to.be.greaterThan(FAILURE_MESSAGE_BUDGET - 100)
    expect(err.message).to.match(/\nstderr:\n…e+TAIL$/)
  })
})

describe('process/failure: isBlank', () => {
  it('is true for no bytes and for ASCII whitespace only', () => {
    expect(isBlank(new Uint8Array())).to.equal(true)
    expect(isBlank(Buffer.from(' \n\r\t\f\v'))).to.equal(true)
  })

  it('is false as soon as one byte is something else, including non-ASCII spaces and NUL', () => {
    expect(isBlank(Buffer.from('  a  '))).to.equal(false)
    expect(isBlank(Buffer.from('\u00a0'))).to.equal(false)
    expect(isBlank(Buffer.from([0]))).to.equal(false)
    expect(isBlank(Buffer.from('{}'))).to.equal(false)
  })
})

describe('process/failure: emptyOutputError', () => {
  it('is undefined for an output with content', () => {
    expect(emptyOutputError(IMAGE, outcome({stdout: 'items: []\n', exitCode: 0}))).to.equal(undefined)
  })

  it('refuses an empty output as FunctionFailed, saying why', () => {
    const err = emptyOutputError(IMAGE, outcome({exitCode: 0}))!
    expect(err.kind).to.equal('FunctionFailed')
    expect(err.message).to.equal(
      'function "example.com/fn:v1" exited with code 0 but wrote no output to stdout, not a ResourceList: refusing to return it, because an empty output would delete every resource of the package',
    )
    expect(err.details.emptyOutput).to.equal(true)
  })

  it('counts the bytes of a whitespace-only output and adds the stderr tail', () => {
    const err = emptyOutputError(IMAGE, outcome({stdout: '\n\n \n', stderr: 'p'.repeat(3000) + 'done\n', exitCode: 0}))!
    const [first, label, tail] = err.message.split('\n')
    expect(first).to.include('wrote only whitespace (4 bytes) to stdout')
    expect(label).to.equal('stderr:')
    expect(tail).to.equal('…' + ('p'.repeat(3000) + 'done').slice(-1024))
    expect(err.details.stderr).to.deep.equal(Buffer.from('p'.repeat(3000) + 'done\n'))
  })

  it('leaves out a blank stderr', () => {
    expect(emptyOutputError(IMAGE, outcome({stderr: '  \n', exitCode: 0}))!.message).not.to.include('stderr')
  })
})
