import {mkdir, mkdtemp, rm, writeFile} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import tls from 'node:tls'

import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import {loadCaFile, loadCaFromDirectory, trustedCertificates} from '../../src/lib/registry/tls.js'
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
})
