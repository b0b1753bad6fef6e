/**
 * The reliability tally itself (test/support/reliability/tally.ts): what makes two bad inputs
 * distinct, what is not counted, and when the root-level hook fails the run.
 */
import path from 'node:path'

import {expect} from 'chai'

import {MIN_DISTINCT_BAD_INPUTS, Tally, inputKey, reliabilityFiles, wholeSetRan} from '../support/reliability/tally.js'

describe('reliability: the bad-input tally', () => {
  it('keys an input on its content: the same bytes under two labels or areas count once, a one-byte change counts again', () => {
    const t = new Tally()
    t.tried('grpc image', {image: 'a b'})
    t.tried('grpc image (wrapper)', {image: 'a b'})
    t.tried('grpc payload', {resourceList: Buffer.from('x')})
    t.tried('grpc payload', {resourceList: Buffer.from('y')})
    // a string and a Buffer of the same bytes are different inputs (a name vs. a payload)
    expect(inputKey('x')).to.not.equal(inputKey(Buffer.from('x')))
    expect(inputKey({a: 1, b: 2})).to.equal(inputKey({b: 2, a: 1}))
    expect(t.distinct).to.equal(3)
    expect(t.byArea()).to.deep.equal({'grpc image': 1, 'grpc payload': 2})
  })

  it('does not count valid control inputs or injected faults; an input bad anywhere is bad', () => {
    const t = new Tally()
    t.tried('grpc image', {image: 'EXAMPLE.COM/cat:v1'}, {valid: true})
    t.fault('a function that hangs')
    expect(t.distinct).to.equal(0)
    t.tried('grpc image', {image: 'EXAMPLE.COM/cat:v1'})
    t.tried('grpc image', {image: 'EXAMPLE.COM/cat:v1'}, {valid: true})
    expect(t.distinct).to.equal(1)
    expect(t.summary()).to.match(/^bad inputs tried: 1 distinct, crashes: 0, hangs: 0\n/)
    expect(t.summary()).to.contain('not counted: 0 valid control inputs expected to succeed, 1 injected faults')
  })

  it(`fails on any crash or hang, and below ${MIN_DISTINCT_BAD_INPUTS} distinct bad inputs only when the whole set ran`, () => {
    const t = new Tally()
    for (let i = 0; i < MIN_DISTINCT_BAD_INPUTS - 1; i++) t.tried('x', {i})
    expect(t.problems(false)).to.deep.equal([])
    expect(t.problems(true)).to.deep.equal([`only ${MIN_DISTINCT_BAD_INPUTS - 1} distinct bad inputs, fewer than ${MIN_DISTINCT_BAD_INPUTS}`])
    t.tried('x', {i: 'last'})
    expect(t.problems(true)).to.deep.equal([])
    t.hang('a call')
    t.crash('a call', 'UNAVAILABLE')
    expect(t.problems(false)).to.deep.equal(['1 crash(es)', '1 hang(s)'])
  })

  it('knows whether the whole reliability set ran: every file loaded and every test in them run', () => {
    const files = reliabilityFiles()
    expect(files).to.include(path.resolve('test/reliability/tally.test.ts'))
    const suite = (file: string, states: Array<string | undefined>) => ({file, suites: [], tests: states.map((state) => ({file, state}))})
    const all = {suites: files.map((f) => suite(f, ['passed', 'failed'])), tests: []}
    expect(wholeSetRan(all)).to.deep.equal({whole: true, why: `all ${files.length} reliability files ran`})
    expect(wholeSetRan({suites: all.suites.slice(1), tests: []})).to.deep.equal({whole: false, why: `${files.length - 1} of ${files.length} reliability files loaded`})
    // --grep: loaded, but some tests never ran
    const grep = {suites: files.map((f, i) => suite(f, i === 0 ? ['passed', undefined] : ['passed'])), tests: []}
    expect(wholeSetRan(grep)).to.deep.equal({whole: false, why: '1 reliability test(s) did not run'})
    // a test that ran and skipped itself with its reason (the npm audit where npm cannot audit) ran
    const selfSkipped = {suites: [...all.suites.slice(1), {file: files[0]!, suites: [], tests: [{file: files[0]!, state: 'pending', skipReason: 'audit could not run: 405'}]}], tests: []}
    expect(wholeSetRan(selfSkipped)).to.deep.equal({whole: true, why: `all ${files.length} reliability files ran`})
    const skipped = {suites: [...all.suites.slice(1), suite(files[0]!, ['pending'])], tests: []}
    expect(wholeSetRan(skipped)).to.deep.equal({whole: false, why: '1 reliability test(s) did not run'})
  })
})
