import {mkdir, mkdtemp, rm, writeFile} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import tls from 'node:tls'

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
import {isCertificateError, loadCaFile, loadCaFromDirectory, trustedCertificates} from '../../src/lib/registry/tls.js'
import {makeCa} from '../support/registry/certs.js'
import {requireTools} from '../support/registry/tools.js'

async function rejection(p: Promise<unknown>): Promise<FnrError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(err, 'expected a rejection').to.be.instanceOf(FnrError)
  return err as FnrError
}

describe('registry/tls: CA files', function () {
  let dir: string
  let caPem: string

  before(async function () {
    requireTools('openssl')
    dir = await mkdtemp(path.join(os.tmpdir(), 'fnr-tls-'))
    caPem = (await makeCa(dir, 'test-ca')).certPem
  })
  after(async () => {
    await rm(dir, {recursive: true, force: true})
  })

  it('loads a PEM file and keeps only its certificates', async () => {
    const file = path.join(dir, 'with-junk.pem')
    await writeFile(file, `# a comment\n${caPem}\ntrailing junk\n`)
    const pem = await loadCaFile(file)
    expect(pem.trim()).to.equal(caPem.trim())
  })

  it('rejects a missing file, a directory, garbage and a broken certificate with Config errors', async () => {
    expect((await rejection(loadCaFile(path.join(dir, 'nope.crt')))).message).to.match(/nope\.crt does not exist/)
    expect((await rejection(loadCaFile(dir))).message).to.match(/is a directory/)
    const garbage = path.join(dir, 'garbage.pem')
    await writeFile(garbage, 'not a certificate\n')
    const e1 = await rejection(loadCaFile(garbage))
    expect(e1.kind).to.equal('Config')
    expect(e1.message).to.match(/failed to append certificates from PEM/)
    const broken = path.join(dir, 'broken.pem')
    await writeFile(broken, '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n')
    expect((await rejection(loadCaFile(broken))).message).to.match(/failed to append certificates from PEM/)
  })

  it('reads ca.crt, else ca.pem, from a --tls-secret-path directory, as Porch does', async () => {
    const both = path.join(dir, 'both')
    await mkdir(both)
    await writeFile(path.join(both, 'ca.crt'), caPem)
    await writeFile(path.join(both, 'ca.pem'), 'garbage')
    expect((await loadCaFromDirectory(both)).file).to.equal(path.join(both, 'ca.crt'))
    const pemOnly = path.join(dir, 'pem-only')
    await mkdir(pemOnly)
    await writeFile(path.join(pemOnly, 'ca.pem'), caPem)
    expect((await loadCaFromDirectory(pemOnly)).file).to.equal(path.join(pemOnly, 'ca.pem'))
    const empty = path.join(dir, 'empty')
    await mkdir(empty)
    const e = await rejection(loadCaFromDirectory(empty))
    expect(e.kind).to.equal('Config')
    expect(e.message).to.match(/ca\.crt not found, and ca\.pem not found/)
    expect((await rejection(loadCaFromDirectory(path.join(dir, 'missing')))).message).to.match(/does not exist/)
  })

  it('adds custom CAs to the system roots instead of replacing them', () => {
    expect(trustedCertificates([])).to.equal(undefined)
    const list = trustedCertificates([caPem])!
    expect(list).to.include(caPem)
    for (const root of tls.rootCertificates.slice(0, 5)) expect(list).to.include(root)
    expect(list.length).to.be.greaterThan(tls.rootCertificates.length)
  })

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
