/**
 * RegistryClient against docker-registry over HTTPS with a CA made by openssl at test time (and
 * Basic auth): the CA is added per request, a missing or wrong CA fails clearly, and an insecure
 * listing skips verification without ever using plain HTTP.
 */
import {copyFile, mkdir, mkdtemp, rm} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'

import {expect} from 'chai'

import {DockerConfig} from '../../src/lib/registry/auth.js'
import {RegistryClient, type RegistryClientOptions} from '../../src/lib/registry/client.js'
import {createRunnerRegistry} from '../../src/lib/registry/index.js'
import {loadCaFile} from '../../src/lib/registry/tls.js'
import {expectFnrError} from '../support/registry/assert.js'
import {makeCa} from '../support/registry/certs.js'
import {seedImages, type SeededImages} from '../support/registry/fixtures.js'
import {TestRegistry} from '../support/registry/registry.js'

describe('registry client: docker-registry over TLS with a custom CA', function () {
  let registry: TestRegistry
  let images: SeededImages
  let authFile: string
  let dockerConfig: DockerConfig
  let dir: string
  let wrongCaFile: string
  const clients: RegistryClient[] = []

  function client(options: RegistryClientOptions = {}): RegistryClient {
    const c = new RegistryClient({dockerConfig, retryDelayMs: 5, ...options})
    clients.push(c)
    return c
  }

  before(async function () {
    registry = await TestRegistry.start({mode: 'tls'})
    authFile = await registry.writeAuthFile('testuser', 'testpass')
    dockerConfig = await DockerConfig.load(authFile)
    images = await seedImages(registry, {authFile})
    dir = await mkdtemp(path.join(os.tmpdir(), 'fnr-tls-client-'))
    wrongCaFile = (await makeCa(dir, 'wrong', '/CN=some other CA')).certFile
  })

  after(async function () {
    for (const c of clients) c.close()
    await registry?.stop()
    if (dir) await rm(dir, {recursive: true, force: true})
  })

  it('trusts the registry with its CA added to the system roots', async function () {
    const c = client({caCertificates: [await loadCaFile(registry.ca!.certFile)]})
    expect((await c.inspect(`${registry.host}/fn/hello:v1`)).digest).to.equal(images.hello.manifest.digest)
    expect((await c.inspect(`${registry.host}/fn/multi:v1`, {platform: 'linux/arm64'})).command).to.deep.equal(['/fn-arm64'])
  })

  it('fails with FailedPrecondition, not a retry or a plain-HTTP fallback, without the CA', async function () {
    await expectFnrError(
      client().inspect(`${registry.host}/fn/hello:v1`),
      'FailedPrecondition',
      new RegExp(`^TLS certificate of registry ${registry.host} is not trusted for image "${registry.host}/fn/hello:v1": .+ \\(give its CA with --ca-file / --tls-secret-path, or list it as insecure\\)$`),
    )
  })

  it('fails the same way with a wrong CA', async function () {
    await expectFnrError(client({caCertificates: [await loadCaFile(wrongCaFile)]}).inspect(`${registry.host}/fn/hello:v1`), 'FailedPrecondition', /is not trusted/)
  })

  it('skips verification (over HTTPS, still) for a registry listed as insecure', async function () {
    const c = client({insecureRegistries: [registry.host]})
    expect((await c.inspect(`${registry.host}/fn/hello:v1`)).digest).to.equal(images.hello.manifest.digest)
  })

  it('builds the serve client with --enable-private-registries-tls from ca.crt or ca.pem in --tls-secret-path', async function () {
    const secretDir = path.join(dir, 'tls-secret')
    await mkdir(secretDir)
    await copyFile(registry.ca!.certFile, path.join(secretDir, 'ca.pem'))
    const runner = await createRunnerRegistry({enablePrivateRegistries: true, authSecretPath: authFile, enableTls: true, tlsSecretPath: secretDir})
    clients.push(runner.client)
    expect((await runner.client.inspect(`${registry.host}/fn/hello:v1`)).digest).to.equal(images.hello.manifest.digest)

    const withoutTls = await createRunnerRegistry({enablePrivateRegistries: true, authSecretPath: authFile, enableTls: false, tlsSecretPath: secretDir})
    clients.push(withoutTls.client)
    await expectFnrError(withoutTls.client.inspect(`${registry.host}/fn/hello:v1`), 'FailedPrecondition', /is not trusted/)

    await expectFnrError(
      createRunnerRegistry({enablePrivateRegistries: true, authSecretPath: authFile, enableTls: true, tlsSecretPath: path.join(dir, 'nope')}),
      'Config',
      /TLS secret path .*nope does not exist/,
    )
  })
})
