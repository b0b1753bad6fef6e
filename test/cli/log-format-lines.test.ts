/** --log-format's text and JSON lines and how the format is chosen (src/lib/telemetry/log.ts), in process; the commands' flag and real terminals are in ./log-format.test.ts. */
import {expect} from 'chai'
import {PassThrough} from 'node:stream'

import {FnrError} from '../../src/lib/errors.js'
import {createLogger, resolveLogFormat, setLogFormat} from '../../src/lib/telemetry/log.js'

const TEXT_LINE = /^\[\d\d:\d\d:\d\d\.\d\d\d\] [A-Z]+ \(fnr-[a-z-]+\): .+$/

function capture(): {stream: PassThrough; text: () => string} {
  const stream = new PassThrough()
  let out = ''
  stream.on('data', (c: Buffer) => (out += c.toString()))
  return {stream, text: () => out}
}

describe('--log-format', function () {
  this.timeout(60_000)
  afterEach(() => setLogFormat(undefined))

  it('text: one line per message with time, level, name, message and the fields (secrets redacted)', () => {
    const {stream, text} = capture()
    const logger = createLogger({verbosity: 5, name: 'fnr-serve', destination: stream, format: 'text'})
    logger.lifecycle('fnr serve is ready', {port: 9445})
    logger.child({image: 'fn:v1'}).request('call', {token: 's3cret'})
    logger.trace('deep')
    const lines = text().trimEnd().split('\n')
    expect(lines).to.have.length(3)
    for (const line of lines) expect(line).to.match(TEXT_LINE)
    expect(lines[0]).to.match(/ LIFECYCLE \(fnr-serve\): fnr serve is ready \{"port":9445\}$/)
    expect(lines[1]).to.match(/ REQUEST \(fnr-serve\): call \{"image":"fn:v1","token":"\[redacted\]"\}$/)
    expect(lines[2]).to.match(/ TRACE \(fnr-serve\): deep$/)
    expect(text()).not.to.contain('\u001B[')
  })

  it('json: the JSON lines as before; the level filter is the same in both formats', () => {
    const {stream, text} = capture()
    const logger = createLogger({verbosity: 1, name: 'fnr-serve', destination: stream, format: 'json'})
    logger.info('not at verbosity 1')
    logger.lifecycle('ready', {port: 1})
    const lines = text().trimEnd().split('\n')
    expect(lines).to.have.length(1)
    expect(JSON.parse(lines[0]!)).to.include({level: 'lifecycle', name: 'fnr-serve', msg: 'ready', port: 1})
  })

  it('default: the flag (setLogFormat), else $FNR_LOG_FORMAT, else text on a terminal and json otherwise', () => {
    const pipe = new PassThrough()
    const tty = Object.assign(new PassThrough(), {isTTY: true})
    expect(resolveLogFormat(pipe, undefined, {})).to.equal('json')
    expect(resolveLogFormat(tty, undefined, {})).to.equal('text')
    expect(resolveLogFormat(pipe, undefined, {FNR_LOG_FORMAT: 'text'})).to.equal('text')
    expect(resolveLogFormat(tty, undefined, {FNR_LOG_FORMAT: 'json'})).to.equal('json')
    setLogFormat('json')
    expect(resolveLogFormat(tty, undefined, {FNR_LOG_FORMAT: 'text'})).to.equal('json')
    expect(resolveLogFormat(tty, 'text', {})).to.equal('text')
    setLogFormat(undefined)
    expect(() => resolveLogFormat(pipe, undefined, {FNR_LOG_FORMAT: 'yaml'}))
      .to.throw(FnrError, 'FNR_LOG_FORMAT must be json or text, got "yaml"')
  })
})
