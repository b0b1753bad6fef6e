/**
 * RegistryClient against docker-registry with Bearer token auth and a token service written in the
 * test (token-server.ts): the challenge flow, cached tokens, wrong and missing credentials, and
 * stale tokens (one fresh token, one retry, never a loop).
 */
import http from 'node:http'
import {mkdtemp, rm, writeFile} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'

import {expect} from 'chai'

import {DockerConfig, basicAuthorization} from '../../src/lib/registry/auth.js'
import {RegistryClient, type RegistryClientOptions} from '../../src/lib/registry/client.js'
import {expectFnrError} from '../support/registry/assert.js'
import {makeSigner} from '../support/registry/certs.js'
import {seedImages, type SeededImages} from '../support/registry/fixtures.js'
import {TOKEN_SERVICE, TestRegistry} from '../support/registry/registry.js'
import type {TokenServer} from '../support/registry/token-server.js'

describe('registry client: docker-registry with Bearer token auth', function () {
  let registry: TestRegistry
  let tokens: TokenServer
  let images: SeededImages
  let authFile: string
  let dockerConfig: DockerConfig
  let dir: string
  const clients: RegistryClient[] = []

  function client(options: RegistryClientOptions = {}): RegistryClient {
    const c = new RegistryClient({dockerConfig, insecureRegistries: [registry.host], retryDelayMs: 5, ...options})
    clients.push(c)
    return c
  }

  before(async function () {
    registry = await TestRegistry.start({mode: 'token', refreshTokens: {'refresh-123': 'testuser'}})
    tokens = registry.tokenServer!
    authFile = await registry.writeAuthFile('testuser', 'testpass')
    dockerConfig = await DockerConfig.load(authFile)
    images = await seedImages(registry, {authFile})
    dir = await mkdtemp(path.join(os.tmpdir(), 'fnr-token-'))
  })

  beforeEach(function () {
    tokens.requests.length = 0
    tokens.expiredTokensToIssue = 0
  })

  after(async function () {
    for (const c of clients) c.close()
    await registry?.stop()
    if (dir) await rm(dir, {recursive: true, force: true})
  })

  it('gets a pull token with the docker config credentials and reuses it for the repository', async function () {
    const c = client()
    expect((await c.inspect(`${registry.host}/fn/hello:v1`)).digest).to.equal(images.hello.manifest.digest)
    expect(tokens.requests).to.deep.equal([{method: 'GET', user: 'testuser', scopes: ['repository:fn/hello:pull'], service: TOKEN_SERVICE, outcome: 'issued', expired: false}])
    await c.inspect(`${registry.host}/fn/hello@${images.hello.manifest.digest}`)
    expect(tokens.requests, 'the cached token served the second image').to.have.length(1)
    await c.inspect(`${registry.host}/fn/multi:v1`)
    expect(tokens.requests.map((r) => r.scopes)).to.deep.equal([['repository:fn/hello:pull'], ['repository:fn/multi:pull']])
  })

  it('reports anonymous access to a private repository as Unauthenticated after one token request', async function () {
    await expectFnrError(
      client({dockerConfig: DockerConfig.empty()}).inspect(`${registry.host}/fn/hello:v1`),
      'Unauthenticated',
      new RegExp(`^registry ${registry.host} requires authentication for image "${registry.host}/fn/hello:v1" and no credentials were given \\(UNAUTHORIZED`),
    )
    expect(tokens.requests.map((r) => [r.user, r.outcome])).to.deep.equal([[undefined, 'issued']])
  })

  it('reports a wrong password, refused by the token service, as Unauthenticated', async function () {
    const wrong = await registry.writeAuthFile('testuser', 'nope', 'wrong.json')
    await expectFnrError(
      client({dockerConfig: await DockerConfig.load(wrong)}).inspect(`${registry.host}/fn/hello:v1`),
      'Unauthenticated',
      `registry ${registry.host} rejected the credentials from ${wrong} for image "${registry.host}/fn/hello:v1" (token service answered 401 (UNAUTHORIZED: invalid username or password))`,
    )
  })

  it('replaces a token the registry refuses as expired with one fresh token', async function () {
    tokens.expiredTokensToIssue = 1
    expect((await client().inspect(`${registry.host}/fn/hello:v1`)).digest).to.equal(images.hello.manifest.digest)
    expect(tokens.requests.map((r) => r.expired)).to.deep.equal([true, false])
  })

  it('gives up after one fresh token when every token is refused (no loop)', async function () {
    tokens.expiredTokensToIssue = 100
    await expectFnrError(client().inspect(`${registry.host}/fn/hello:v1`), 'Unauthenticated', /rejected the credentials/)
    expect(tokens.requests).to.have.length(2)
  })

  it('retries once with a fresh token when a cached token goes stale (signing key rotated)', async function () {
    const c = client()
    await c.inspect(`${registry.host}/fn/multi:v1`)
    expect(tokens.requests).to.have.length(1)
    const newSigner = await makeSigner(path.join(registry.dir, 'token'), 'rotated')
    tokens.signer = newSigner
    await registry.restart(newSigner)
    const meta = await c.inspect(`${registry.host}/fn/multi@${images.multi.index.digest}`, {platform: 'linux/arm64'})
    expect(meta.command).to.deep.equal(['/fn-arm64'])
    expect(tokens.requests, 'exactly one fresh token').to.have.length(2)
  })

  it('exchanges an identitytoken (OAuth2 refresh token) and uses a registrytoken as is', async function () {
    const refreshFile = path.join(dir, 'identity.json')
    await writeFile(refreshFile, JSON.stringify({auths: {[registry.host]: {identitytoken: 'refresh-123'}}}))
    const viaRefresh = client({dockerConfig: await DockerConfig.load(refreshFile)})
    expect((await viaRefresh.inspect(`${registry.host}/fn/hello:v1`)).digest).to.equal(images.hello.manifest.digest)
    expect(tokens.requests.map((r) => [r.method, r.user])).to.deep.equal([['POST', 'testuser']])

    const token = await new Promise<string>((resolve, reject) => {
      const url = new URL(tokens.realm)
      url.searchParams.set('service', TOKEN_SERVICE)
      url.searchParams.set('scope', 'repository:fn/hello:pull')
      http
        .get(url, {headers: {authorization: basicAuthorization('testuser', 'testpass')}}, (res) => {
          const chunks: Buffer[] = []
          res.on('data', (c: Buffer) => chunks.push(c))
          res.on('end', () => resolve((JSON.parse(Buffer.concat(chunks).toString()) as {token: string}).token))
        })
        .on('error', reject)
    })
    tokens.requests.length = 0
    const bearerFile = path.join(dir, 'bearer.json')
    await writeFile(bearerFile, JSON.stringify({auths: {[registry.host]: {registrytoken: token}}}))
    const viaToken = client({dockerConfig: await DockerConfig.load(bearerFile)})
    expect((await viaToken.inspect(`${registry.host}/fn/hello:v1`)).digest).to.equal(images.hello.manifest.digest)
    expect(tokens.requests, 'no token request with a registrytoken').to.deep.equal([])
  })
})
