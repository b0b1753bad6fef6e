/**
 * One flag value converted to its type (src/lib/flags/spec.ts): integers with bounds in the CLI's
 * and the wrapper's words, Go booleans, durations, a string flag's options, and kpt's
 * `--flag=true|false` spelling of a boolean with a --no- form. The whole parsers are in
 * ./flag-specs.test.ts.
 */
import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import {convertFlagValue, integerProblem, normalizeBooleanFlags, type FlagSpec, type FlagSpecs} from '../../src/lib/flags/spec.js'

function usage(f: () => unknown): FnrError {
  try {
    f()
  } catch (err) {
    expect(err).to.be.instanceOf(FnrError)
    expect((err as FnrError).kind).to.equal('Usage')
    return err as FnrError
  }
  return expect.fail('expected a usage error')
}

const INT: FlagSpec = {kind: 'integer', summary: 'n', min: 1, max: 10}

describe('flag values', () => {
  it('integerProblem: digits only (a sign allowed for negatives), within min and max', () => {
    expect(integerProblem(INT, '5')).to.equal(undefined)
    expect(integerProblem(INT, '1')).to.equal(undefined)
    expect(integerProblem(INT, '10')).to.equal(undefined)
    expect(integerProblem(INT, '0')).to.equal('expected an integer greater than or equal to 1, got 0')
    expect(integerProblem(INT, '11')).to.equal('expected an integer less than or equal to 10, got 11')
    expect(integerProblem(INT, '1.5')).to.equal('expected an integer, got "1.5"')
    expect(integerProblem(INT, '+3')).to.equal('expected an integer, got "+3"')
    expect(integerProblem({}, '-7')).to.equal(undefined)
  })

  it('integers: the CLI says "Parsing --name", the wrapper its own words (a sign and blanks allowed)', () => {
    expect(convertFlagValue('n', INT, '7')).to.equal(7)
    expect(usage(() => convertFlagValue('n', INT, 'x')).message).to.equal('Parsing --n: expected an integer, got "x"')
    expect(convertFlagValue('n', INT, '+7', 'wrapper')).to.equal(7)
    expect(usage(() => convertFlagValue('n', INT, '12', 'wrapper')).message).to.equal('--n: expected an integer between 1 and 10, got 12')
    expect(usage(() => convertFlagValue('n', INT, 'x', 'wrapper')).message).to.equal('--n: expected an integer, got "x"')
  })

  it('Go booleans take Go\'s spellings; durations become ms; a string flag with options takes only those', () => {
    const bool: FlagSpec = {kind: 'go-bool', summary: 'b'}
    for (const t of ['1', 't', 'T', 'true', 'TRUE', 'True']) expect(convertFlagValue('b', bool, t), t).to.equal(true)
    for (const f of ['0', 'f', 'F', 'false', 'FALSE', 'False']) expect(convertFlagValue('b', bool, f), f).to.equal(false)
    expect(usage(() => convertFlagValue('b', bool, 'yes')).message).to.equal('Parsing --b: expected true or false, got "yes"')
    const duration: FlagSpec = {kind: 'duration', summary: 'd'}
    expect(convertFlagValue('d', duration, '1h30m')).to.equal(5_400_000)
    expect(convertFlagValue('d', duration, '500ms')).to.equal(500)
    expect(usage(() => convertFlagValue('d', duration, 'soon')).message).to.equal('Parsing --d: expected a duration like 30m, 1h30m or 500ms, got "soon"')
    const choice: FlagSpec = {kind: 'string', summary: 'o', options: ['json', 'text']}
    expect(convertFlagValue('o', choice, 'text')).to.equal('text')
    expect(usage(() => convertFlagValue('o', choice, 'yaml')).message).to.equal('Expected --o=yaml to be one of: json, text')
    expect(convertFlagValue('s', {kind: 'string', summary: 's'}, 'anything')).to.equal('anything')
  })

  it('--flag=true|false becomes --flag / --no-flag for booleans with a --no- form only', () => {
    const specs: FlagSpecs = {
      'truncate-output': {kind: 'boolean', summary: 't', allowNo: true},
      verbose: {kind: 'boolean', summary: 'v'},
      name: {kind: 'string', summary: 'n'},
    }
    expect(normalizeBooleanFlags(['--truncate-output=false', '--truncate-output=true', '--verbose=false', '--name=true', '--other=false', 'pos'], specs)).to.deep.equal([
      '--no-truncate-output',
      '--truncate-output',
      '--verbose=false',
      '--name=true',
      '--other=false',
      'pos',
    ])
  })
})
