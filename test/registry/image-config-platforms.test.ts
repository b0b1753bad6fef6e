/** registry/image-config (platforms, index entries, the function command, the wrapper-server args) and registry/tls's certificate error check: pure. The CA files (made with openssl) are in ./tls-and-image-config.test.ts. */
import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import {
  DEFAULT_PLATFORM,
  functionCommand,
  parsePlatform,
  requireFunctionCommand,
  selectPlatformEntry,
  shellQuote,
  wrapperServerArgs,
  type IndexEntry,
} from '../../src/lib/registry/image-config.js'
import {isCertificateError} from '../../src/lib/registry/tls.js'

describe('registry/tls: certificate errors', () => {
  it('recognises certificate verification errors', () => {
    expect(isCertificateError(Object.assign(new Error('x'), {code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE'}))).to.equal(true)
    expect(isCertificateError(Object.assign(new Error('x'), {code: 'ECONNREFUSED'}))).to.equal(false)
  })
})

describe('registry/image-config', () => {
  it('parses platforms with aliases and default variants', () => {
    expect(parsePlatform('linux/amd64')).to.deep.equal(DEFAULT_PLATFORM)
    expect(parsePlatform('linux/x86_64')).to.deep.equal({os: 'linux', architecture: 'amd64'})
    expect(parsePlatform('linux/arm64/v8')).to.deep.equal({os: 'linux', architecture: 'arm64'})
    expect(parsePlatform('Linux/ARM/v7')).to.deep.equal({os: 'linux', architecture: 'arm', variant: 'v7'})
    for (const bad of ['linux', 'linux/', 'a/b/c/d', 'linux/amd 64']) {
      expect(() => parsePlatform(bad), bad).to.throw(FnrError, /invalid platform/)
    }
  })

  const entries: IndexEntry[] = [
    {digest: 'sha256:att', platform: {os: 'unknown', architecture: 'unknown'}},
    {digest: 'sha256:amd', platform: {os: 'linux', architecture: 'amd64'}},
    {digest: 'sha256:arm64', platform: {os: 'linux', architecture: 'arm64', variant: 'v8'}},
    {digest: 'sha256:armv6', platform: {os: 'linux', architecture: 'arm', variant: 'v6'}},
    {digest: 'sha256:armv7', platform: {os: 'linux', architecture: 'arm', variant: 'v7'}},
    {digest: 'sha256:win', platform: {os: 'windows', architecture: 'amd64'}},
    {digest: 'sha256:noplatform'},
  ]

  it('selects the index entry for a platform and never an attestation', () => {
    expect(selectPlatformEntry(entries, parsePlatform('linux/amd64'))?.digest).to.equal('sha256:amd')
    expect(selectPlatformEntry(entries, parsePlatform('linux/arm64'))?.digest).to.equal('sha256:arm64')
    expect(selectPlatformEntry(entries, parsePlatform('linux/arm/v7'))?.digest).to.equal('sha256:armv7')
    expect(selectPlatformEntry(entries, parsePlatform('linux/arm'))?.digest).to.equal('sha256:armv7')
    expect(selectPlatformEntry(entries, parsePlatform('linux/arm/v6'))?.digest).to.equal('sha256:armv6')
    expect(selectPlatformEntry(entries, parsePlatform('windows/amd64'))?.digest).to.equal('sha256:win')
    expect(selectPlatformEntry(entries, parsePlatform('linux/s390x'))).to.equal(undefined)
    expect(selectPlatformEntry(entries, {os: 'unknown', architecture: 'unknown'})?.digest).to.equal('sha256:att')
  })

  it('runs Entrypoint then Cmd, or whichever is set, and refuses an image with neither', () => {
    expect(functionCommand(['/fn'], ['--x'])).to.deep.equal(['/fn', '--x'])
    expect(functionCommand(['/fn'], [])).to.deep.equal(['/fn'])
    expect(functionCommand([], ['/bin/sh', '-c', 'cat'])).to.deep.equal(['/bin/sh', '-c', 'cat'])
    expect(functionCommand([], [])).to.deep.equal([])
    expect(() => requireFunctionCommand('r.io/x:v1', [], [])).to.throw(FnrError, /image "r\.io\/x:v1" has neither Entrypoint nor Cmd/)
    try {
      requireFunctionCommand('x', [], [])
    } catch (err) {
      expect((err as FnrError).kind).to.equal('FailedPrecondition')
    }
  })

  it('builds the wrapper-server args Porch puts in the function container', () => {
    expect(wrapperServerArgs(['/usr/local/bin/function'])).to.deep.equal(['--port', '9446', '--max-request-body-size', '6291456', '--', '/usr/local/bin/function'])
    expect(wrapperServerArgs(['a', 'b'], {port: 1, maxRequestBodySize: 2})).to.deep.equal(['--port', '1', '--max-request-body-size', '2', '--', 'a', 'b'])
  })

  it('quotes argv for display', () => {
    expect(shellQuote(['/bin/sh', '-c', "echo 'hi' there", ''])).to.equal(`/bin/sh -c 'echo '\\''hi'\\'' there' ''`)
  })
})
