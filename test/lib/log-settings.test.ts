/**
 * The log settings fnr reads before it logs (src/lib/telemetry/log.ts): the log formats and the
 * message that names a bad one, and the verbosity clamped to the levels there are. The lines
 * themselves are in test/cli/log-format-lines.test.ts.
 */
import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import {clampVerbosity, LOG_FORMATS, parseLogFormat} from '../../src/lib/telemetry/log.js'

describe('log settings', () => {
  it('takes json or text, and names where a bad format came from', () => {
    expect([...LOG_FORMATS]).to.deep.equal(['json', 'text'])
    expect(parseLogFormat('json', '--log-format')).to.equal('json')
    expect(parseLogFormat('text', 'FNR_LOG_FORMAT')).to.equal('text')
    for (const bad of ['JSON', 'yaml', '', ' text']) {
      expect(() => parseLogFormat(bad, 'FNR_LOG_FORMAT'), bad).to.throw(FnrError, `FNR_LOG_FORMAT must be json or text, got ${JSON.stringify(bad)}`).with.property('kind', 'Usage')
    }
  })

  it('clamps the verbosity to 0..5, truncating fractions; a value that is not a number is the default 2', () => {
    expect([-3, 0, 2, 3.9, 5, 99].map(clampVerbosity)).to.deep.equal([0, 0, 2, 3, 5, 5])
    expect(clampVerbosity(Number.NaN)).to.equal(2)
    expect(clampVerbosity(Number.POSITIVE_INFINITY)).to.equal(2)
  })
})
