import {expect} from 'chai'

import {formatDuration, normaliseGoStyleArgs, parseGoBool, parseGoDuration} from '../../src/lib/config/go-flags.js'
import {FnrError} from '../../src/lib/errors.js'
import {enabledRuntimes} from '../../src/lib/serve.js'

describe('Go-style flags', () => {
  const bools = new Set(['warm-up-pod-cache', 'enable-private-registries'])
  const known = new Set(['port', 'warm-up-pod-cache', 'enable-private-registries', 'config'])

  it('turns single-dash long flags into double-dash ones', () => {
    expect(normaliseGoStyleArgs(['-port=9445', '-config', 'x', '-h'], bools, known)).to.deep.equal(['--port=9445', '--config', 'x', '-h'])
  })

  it('gives bare boolean flags the value true', () => {
    expect(normaliseGoStyleArgs(['--enable-private-registries', '--port=1'], bools, known)).to.deep.equal(['--enable-private-registries=true', '--port=1'])
    expect(normaliseGoStyleArgs(['--warm-up-pod-cache=false'], bools, known)).to.deep.equal(['--warm-up-pod-cache=false'])
  })

  it('reads "--flag false" as the value instead of silently dropping later flags (an upstream bug)', () => {
    expect(normaliseGoStyleArgs(['--warm-up-pod-cache', 'false', '--port=1'], bools, known)).to.deep.equal(['--warm-up-pod-cache=false', '--port=1'])
  })

  it('leaves everything after -- alone', () => {
    expect(normaliseGoStyleArgs(['--', '-port', '--enable-private-registries'], bools, known)).to.deep.equal(['--', '-port', '--enable-private-registries'])
  })

  it('parses Go booleans and durations', () => {
    expect(parseGoBool('T')).to.equal(true)
    expect(parseGoBool('0')).to.equal(false)
    expect(parseGoBool('yes')).to.equal(undefined)
    expect(parseGoDuration('30m')).to.equal(1_800_000)
    expect(parseGoDuration('1h30m')).to.equal(5_400_000)
    expect(parseGoDuration('1.5s')).to.equal(1500)
    expect(parseGoDuration('250ms')).to.equal(250)
    expect(parseGoDuration('0')).to.equal(0)
    expect(parseGoDuration('-1m')).to.equal(-60_000)
    expect(parseGoDuration('30')).to.equal(undefined)
    expect(parseGoDuration('abc')).to.equal(undefined)
    // as Go's time.Duration.String prints them
    expect(formatDuration(5_400_000)).to.equal('1h30m0s')
    expect(formatDuration(90_000)).to.equal('1m30s')
    expect(formatDuration(60_000)).to.equal('1m0s')
    expect(formatDuration(1000)).to.equal('1s')
    expect(formatDuration(1500)).to.equal('1.5s')
    expect(formatDuration(250)).to.equal('250ms')
    expect(formatDuration(5.546552)).to.equal('5.546552ms')
    expect(formatDuration(0.25)).to.equal('250µs')
    expect(formatDuration(-2000)).to.equal('-2s')
    expect(formatDuration(0)).to.equal('0s')
  })
})

describe('--disable-runtimes', () => {
  it('keeps exec before pod', () => {
    expect(enabledRuntimes('')).to.deep.equal(['exec', 'pod'])
    expect(enabledRuntimes('pod')).to.deep.equal(['exec'])
    expect(enabledRuntimes('exec')).to.deep.equal(['pod'])
  })

  it('trims values (upstream does not, so "exec, pod" leaves pod on there)', () => {
    expect(() => enabledRuntimes('exec, pod')).to.throw(FnrError, /every runtime is disabled/)
  })

  it('rejects unknown runtimes and disabling everything', () => {
    expect(() => enabledRuntimes('docker')).to.throw(FnrError, /unknown runtime "docker"/)
    try {
      enabledRuntimes('exec,pod')
      expect.fail('should throw')
    } catch (err) {
      expect((err as FnrError).kind).to.equal('Config')
    }
  })
})
