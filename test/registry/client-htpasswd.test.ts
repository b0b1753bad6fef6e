/**
 * RegistryClient against docker-registry with htpasswd (bcrypt) Basic auth: credentials from a
 * docker config, wrong and missing credentials, no Authorization on redirects to another origin,
 * and the pull Secret's contents working as credentials.
 */
import {mkdtemp, readFile, rm, writeFile} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'

import {expect} from 'chai'

import {DockerConfig, basicAuthorization} from '../../src/lib/registry/auth.js'
import {RegistryClient, type RegistryClientOptions} from '../../src/lib/registry/client.js'
import {createRunnerRegistry} from '../../src/lib/registry/index.js'
import {DOCKER_CONFIG_JSON_KEY, buildPullSecret, secretHasCredentialsFor} from '../../src/lib/registry/pull-secret.js'
import {expectFnrError} from '../support/registry/assert.js'
import {seedImages, type SeededImages} from '../support/registry/fixtures.js'
import {skopeoRawManifest} from '../support/registry/oci-layout.js'
import {RegistryProxy} from '../support/registry/proxy.js'
import {TestRegistry, dockerConfigJson} from '../support/registry/registry.js'

describe('registry client: docker-registry with htpasswd (Basic)', function () {
  let registry: TestRegistry
  let images: SeededImages
  let authFile: string
  let dir: string
  const clients: RegistryClient[] = []
  const proxies: RegistryProxy[] = []

  async function client(options: RegistryClientOptions & {auth?: string} = {}): Promise<RegistryClient> {
    const dockerConfig = options.auth === undefined ? undefined : await DockerConfig.load(options.auth)
    const c = new RegistryClient({insecureRegistries: [registry.host], retryDelayMs: 5, dockerConfig, ...options})
    clients.push(c)
    return c
  }

  before(async function () {
    registry = await TestRegistry.start({mode: 'htpasswd', users: {testuser: 'testpass', other: 'pw:with:colons'}})
    authFile = await registry.writeAuthFile('testuser', 'testpass')
    images = await seedImages(registry, {authFile})
    dir = await mkdtemp(path.join(os.tmpdir(), 'fnr-htpasswd-'))
  })

  after(async function () {
    for (const c of clients) c.close()
    for (const p of proxies) await p.stop()
    await registry?.stop()
    if (dir) await rm(dir, {recursive: true, force: true})
  })

  it('pulls with "auth" credentials and with username/password fields', async function () {
    const meta = await (await client({auth: authFile})).inspect(`${registry.host}/fn/hello:v1`)
    expect(meta.digest).to.equal(images.hello.manifest.digest)
    const fields = await registry.writeAuthFile('other', 'pw:with:colons', 'fields.json', 'fields')
    expect((await (await client({auth: fields})).inspect(`${registry.host}/fn/multi:v1`)).command).to.deep.equal(['/fn-amd64'])
  })

  it('matches docker config keys written with a scheme and path', async function () {
    const file = path.join(dir, 'scheme.json')
    await writeFile(file, dockerConfigJson(`http://${registry.host}/v2/`, 'testuser', 'testpass'))
    expect((await (await client({auth: file})).inspect(`${registry.host}/fn/hello:v1`)).digest).to.equal(images.hello.manifest.digest)
  })

  it('says when no credentials were given, and when the file has none for this registry', async function () {
    await expectFnrError(
      (await client()).inspect(`${registry.host}/fn/hello:v1`),
      'Unauthenticated',
      `registry ${registry.host} requires authentication for image "${registry.host}/fn/hello:v1" and no credentials were given (UNAUTHORIZED: authentication required)`,
    )
    const elsewhere = path.join(dir, 'elsewhere.json')
    await writeFile(elsewhere, dockerConfigJson('127.0.0.1:1', 'testuser', 'testpass'))
    await expectFnrError(
      (await client({auth: elsewhere})).inspect(`${registry.host}/fn/hello:v1`),
      'Unauthenticated',
      `registry ${registry.host} requires authentication for image "${registry.host}/fn/hello:v1" and ${elsewhere} has no credentials for it (UNAUTHORIZED: authentication required)`,
    )
  })

  it('reports a wrong password as Unauthenticated naming the auth file', async function () {
    const wrong = await registry.writeAuthFile('testuser', 'wrong', 'wrong.json')
    await expectFnrError(
      (await client({auth: wrong})).inspect(`${registry.host}/fn/hello:v1`),
      'Unauthenticated',
      `registry ${registry.host} rejected the credentials from ${wrong} for image "${registry.host}/fn/hello:v1" (UNAUTHORIZED: authentication required)`,
    )
  })

  it('sends Basic up front once the registry asked for it, and never to another origin on a redirect', async function () {
    const p = await RegistryProxy.start(registry.port)
    proxies.push(p)
    p.redirectBlobs = true
    p.upstreamAuthorization = basicAuthorization('testuser', 'testpass')
    const file = path.join(dir, 'proxy.json')
    await writeFile(file, dockerConfigJson(p.host, 'testuser', 'testpass'))
    const c = await client({auth: file, insecureRegistries: [p.host]})
    const meta = await c.inspect(`${p.host}/fn/hello:v1`)
    expect(meta.configDigest).to.equal(images.hello.config.digest)
    const direct = p.records.filter((r) => r.origin === 'proxy')
    expect(direct[0]!.authorization, 'first request is anonymous').to.equal(undefined)
    expect(direct.slice(1).every((r) => r.authorization === basicAuthorization('testuser', 'testpass'))).to.equal(true)
    const redirected = p.records.filter((r) => r.origin === 'blob')
    expect(redirected).to.have.length(1)
    expect(redirected[0]!.authorization, 'no credentials sent to the blob origin').to.equal(undefined)
    p.clear()
    p.redirectBlobs = false
    await c.inspect(`${p.host}/fn/multi:v1`)
    expect(p.records.every((r) => r.authorization !== undefined), 'no anonymous round trip any more').to.equal(true)
  })

  it('builds a pull Secret whose .dockerconfigjson works as credentials (checked with skopeo too)', async function () {
    const bytes = await readFile(authFile)
    const secret = buildPullSecret('auth-secret', 'porch-fn-system', bytes)
    const decoded = Buffer.from(secret.data![DOCKER_CONFIG_JSON_KEY]!, 'base64')
    expect(decoded.equals(bytes)).to.equal(true)
    const config = DockerConfig.parse(decoded, 'secret')
    expect(secretHasCredentialsFor(config, `${registry.host}/fn/hello:v1`)).to.equal(true)
    expect(secretHasCredentialsFor(config, 'ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.2.2')).to.equal(false)
    const c = new RegistryClient({dockerConfig: config, insecureRegistries: [registry.host]})
    clients.push(c)
    expect((await c.inspect(`${registry.host}/fn/hello:v1`)).digest).to.equal(images.hello.manifest.digest)
    const secretFile = path.join(dir, 'from-secret.json')
    await writeFile(secretFile, decoded)
    const raw = await skopeoRawManifest(registry, 'fn/hello:v1', secretFile)
    expect(JSON.parse(raw.toString()).config.digest).to.equal(images.hello.config.digest)
  })

  it('builds the serve client from --enable-private-registries and --registry-auth-secret-path', async function () {
    const runner = await createRunnerRegistry(
      {enablePrivateRegistries: true, authSecretPath: authFile, enableTls: false, tlsSecretPath: '/nonexistent'},
      {insecureRegistries: [registry.host]},
    )
    clients.push(runner.client)
    expect(runner.dockerConfigJson?.equals(await readFile(authFile))).to.equal(true)
    expect((await runner.client.inspect(`${registry.host}/fn/hello:v1`)).digest).to.equal(images.hello.manifest.digest)

    const off = await createRunnerRegistry({enablePrivateRegistries: false, authSecretPath: authFile, enableTls: true, tlsSecretPath: '/nonexistent'}, {insecureRegistries: [registry.host]}, {})
    clients.push(off.client)
    expect(off.dockerConfigJson).to.equal(undefined)
    await expectFnrError(off.client.inspect(`${registry.host}/fn/hello:v1`), 'Unauthenticated')

    await expectFnrError(
      createRunnerRegistry({enablePrivateRegistries: true, authSecretPath: path.join(dir, 'missing.json'), enableTls: false, tlsSecretPath: ''}),
      'Config',
      /missing\.json cannot be read/,
    )
  })
})
