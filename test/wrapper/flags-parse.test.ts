/** The wrapper server's flags (src/lib/wrapper.ts, src/commands/wrapper-server.ts) and grpc-health-probe's arguments (src/lib/grpc/health-probe.ts), parsed in process; the protos of the packaged executable are checked in ./flags.test.ts. */
import {expect} from 'chai'

import {parseProbeArgs, probeTargets} from '../../src/lib/grpc/health-probe.js'
import WrapperServer from '../../src/commands/wrapper-server.js'
import {FnrError} from '../../src/lib/errors.js'
import {WRAPPER_DEFAULTS, WRAPPER_FLAGS, parseWrapperArgs} from '../../src/lib/wrapper.js'

function usageError(argv: string[]): FnrError {
  try {
    parseWrapperArgs(argv)
  } catch (err) {
    expect(err).to.be.instanceOf(FnrError)
    expect((err as FnrError).kind, (err as Error).message).to.equal('Usage')
    return err as FnrError
  }
  return expect.fail(`expected a usage error for ${argv.join(' ')}`)
}

describe('wrapper-server flags', () => {
  describe('one set of flags for the oclif command and the packaged executable', () => {
    it('has the same names', () => {
      expect(Object.keys(WrapperServer.flags).sort()).to.deep.equal([...WRAPPER_FLAGS].sort())
    })

    // The limits (port 0-65535, body size >= 1024, verbosity 0-5) are compared by behaviour in process.test.ts.
    it('has the same defaults', () => {
      const f = WrapperServer.flags
      expect(f.port.default).to.equal(WRAPPER_DEFAULTS.port)
      expect(f['max-request-body-size'].default).to.equal(WRAPPER_DEFAULTS.maxRequestBodySize)
      expect(f['log-level'].default).to.equal(WRAPPER_DEFAULTS.logLevel)
      expect(f['grace-period'].default).to.equal(WRAPPER_DEFAULTS.gracePeriodMs)
    })
  })

  describe('parseWrapperArgs (the packaged executable\'s parser)', () => {
    it('has Porch\'s defaults', () => {
      const {options, verbosity} = parseWrapperArgs(['--', '/usr/local/bin/function'])
      expect(options).to.deep.equal({port: 9446, maxRequestBodySize: 6291456, entrypoint: ['/usr/local/bin/function'], gracePeriodMs: 25_000})
      expect(verbosity).to.equal(2)
    })

    it('takes the pod args the function runner writes', () => {
      const {options} = parseWrapperArgs(['--port', '9446', '--max-request-body-size', '6291456', '--', '/usr/local/bin/function', 'a'])
      expect(options.port).to.equal(9446)
      expect(options.maxRequestBodySize).to.equal(6291456)
      expect(options.entrypoint).to.deep.equal(['/usr/local/bin/function', 'a'])
    })

    it('accepts Go\'s one-dash and = spellings, --verbosity and --log-level, and Go durations', () => {
      const a = parseWrapperArgs(['-port=0', '-max-request-body-size', '2048', '-verbosity=4', '--grace-period=1m30s', '--', 'fn'])
      expect(a.options).to.deep.include({port: 0, maxRequestBodySize: 2048, gracePeriodMs: 90_000})
      expect(a.verbosity).to.equal(4)
      expect(parseWrapperArgs(['--log-level', '1', '--', 'fn']).verbosity).to.equal(1)
      expect(parseWrapperArgs(['--log-level=1', '--verbosity=3', '--', 'fn']).verbosity).to.equal(3)
    })

    it('ignores positional arguments before "--" and leaves everything after it alone', () => {
      const {options} = parseWrapperArgs(['serve', '--port=1', 'extra', '--', 'fn', '--port', '5', '--', '-h'])
      expect(options.port).to.equal(1)
      expect(options.entrypoint).to.deep.equal(['fn', '--port', '5', '--', '-h'])
    })

    it('leaves a missing entrypoint to the server (a Config error at startup)', () => {
      expect(parseWrapperArgs(['--port=1']).options.entrypoint).to.deep.equal([])
      expect(parseWrapperArgs(['--port=1', '--']).options.entrypoint).to.deep.equal([])
    })

    it('rejects unknown flags, bad numbers, out-of-range values and bad durations as usage errors', () => {
      expect(usageError(['--bogus', '--', 'fn']).message).to.equal("Unknown option '--bogus'")
      expect(usageError(['--port', 'abc', '--', 'fn']).message).to.contain('--port: expected an integer')
      expect(usageError(['--port=70000', '--', 'fn']).message).to.contain('between 0 and 65535')
      expect(usageError(['--max-request-body-size=10', '--', 'fn']).message).to.contain('between 1024')
      expect(usageError(['--verbosity=9', '--', 'fn']).message).to.contain('--verbosity')
      expect(usageError(['--grace-period=30', '--', 'fn']).message).to.contain('duration')
      expect(usageError(['--port']).message).to.contain('argument missing')
    })
  })

  describe('grpc-health-probe arguments', () => {
    it('parses Porch\'s readiness probe command and Go spellings', () => {
      const defaults = {service: '', connectTimeoutMs: 1000, rpcTimeoutMs: 1000, verbose: false, userAgent: 'grpc_health_probe', headers: [], version: false}
      expect(parseProbeArgs(['-addr', 'localhost:9446'])).to.deep.equal({...defaults, addr: 'localhost:9446'})
      expect(parseProbeArgs(['--addr=127.0.0.1:1', '-service', 'evaluator.FunctionEvaluator', '-connect-timeout=250ms', '-rpc-timeout', '2s', '-v', '-rpc-header', 'X-A:  b', '-tls=false'])).to.deep.equal({
        ...defaults,
        addr: '127.0.0.1:1',
        service: 'evaluator.FunctionEvaluator',
        connectTimeoutMs: 250,
        rpcTimeoutMs: 2000,
        verbose: true,
        headers: [['X-A', 'b']],
      })
      // Go's flag package stops at the first argument that is not a flag and ignores the rest
      expect(parseProbeArgs(['-addr', 'a:1', 'stray', '-nope']).addr).to.equal('a:1')
      expect(parseProbeArgs(['-addr', 'a:1', '--', '-nope']).addr).to.equal('a:1')
    })

    it('refuses missing -addr, unknown flags, TLS and bad durations', () => {
      expect(() => parseProbeArgs([])).to.throw('-addr not specified')
      expect(() => parseProbeArgs(['-addr', 'a:1', '-nope'])).to.throw('flag provided but not defined: -nope')
      expect(() => parseProbeArgs(['-addr', 'a:1', '-tls'])).to.throw('plaintext gRPC only')
      expect(() => parseProbeArgs(['-addr', 'a:1', '-rpc-timeout', '5'])).to.throw('invalid value "5" for flag -rpc-timeout: parse error')
      expect(() => parseProbeArgs(['-addr', 'a:1', '-rpc-timeout', '0'])).to.throw('-rpc-timeout must be greater than zero (specified: 0s)')
      expect(() => parseProbeArgs(['-addr', 'a:1', '-v=maybe'])).to.throw('invalid boolean value "maybe" for -v: parse error')
      expect(() => parseProbeArgs(['---addr'])).to.throw('bad flag syntax: ---addr')
      expect(() => parseProbeArgs(['-addr', 'a:1', '-rpc-header', 'nocolon'])).to.throw("expected 'key: value'")
      expect(() => parseProbeArgs(['-addr', 'a:1', '-tls-ca-cert', 'ca.pem'])).to.throw('plaintext gRPC only')
      expect(() => parseProbeArgs(['-addr'])).to.throw('flag needs an argument')
    })

    it('dials localhost as 127.0.0.1, then ::1 (images need not have /etc/hosts)', () => {
      expect(probeTargets('localhost:9446')).to.deep.equal({authority: 'localhost:9446', targets: ['http://127.0.0.1:9446', 'http://[::1]:9446']})
      expect(probeTargets('10.0.0.1:9446').targets).to.deep.equal(['http://10.0.0.1:9446'])
      expect(probeTargets('::1:9446').targets).to.deep.equal(['http://[::1]:9446'])
      expect(probeTargets('localhost.example:9446').targets).to.deep.equal(['http://localhost.example:9446'])
    })
  })
})
