import {mkdtemp, rm, writeFile} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'

import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import {DockerConfig, TokenCache, basicAuthorization, defaultAuthFile, parseWwwAuthenticate} from '../../src/lib/registry/auth.js'

const b64 = (s: string): string => Buffer.from(s).toString('base64')

function expectConfigError(fn: () => unknown, pattern: RegExp): void {
  let caught: unknown
  try {
    fn()
  } catch (err) {
    caught = err
  }
  expect(caught, 'expected an error').to.be.instanceOf(FnrError)
  expect((caught as FnrError).kind).to.equal('Config')
  expect((caught as FnrError).message).to.match(pattern)
}

describe('registry/auth: docker config', () => {
  it('reads "auth" (base64 user:password) and username/password entries', () => {
    const config = DockerConfig.parse(
      JSON.stringify({
        auths: {
          'ghcr.io': {auth: b64('alice:s3cr:et')},
          '127.0.0.1:5000': {username: 'bob', password: 'pw'},
        },
      }),
    )
    expect(config.credentialsFor('ghcr.io')).to.deep.equal({username: 'alice', password: 's3cr:et'})
    expect(config.credentialsFor('127.0.0.1:5000')).to.deep.equal({username: 'bob', password: 'pw'})
    expect(config.credentialsFor('127.0.0.1:5001')).to.equal(undefined)
    expect(config.registries().sort()).to.deep.equal(['127.0.0.1:5000', 'ghcr.io'])
  })

  it('matches keys by normalised host, with every Docker Hub alias meaning Docker Hub', () => {
    const config = DockerConfig.parse(JSON.stringify({auths: {'https://index.docker.io/v1/': {auth: b64('hub:pw')}, 'HTTPS://Registry.Example.com/v2/': {auth: b64('ex:pw')}}}))
    for (const alias of ['docker.io', 'index.docker.io', 'registry-1.docker.io', 'https://index.docker.io/v1/']) {
      expect(config.credentialsFor(alias), alias).to.deep.equal({username: 'hub', password: 'pw'})
    }
    expect(config.hasCredentialsFor('registry.example.com')).to.equal(true)
    expect(config.hasCredentialsFor('example.com')).to.equal(false)
  })

  it('keeps identitytoken and registrytoken', () => {
    const config = DockerConfig.parse(JSON.stringify({auths: {'a.io': {identitytoken: 'refresh'}, 'b.io': {registrytoken: 'bearer'}}}))
    expect(config.credentialsFor('a.io')).to.deep.equal({identityToken: 'refresh'})
    expect(config.credentialsFor('b.io')).to.deep.equal({registryToken: 'bearer'})
  })

  it('accepts the legacy .dockercfg form and configs with only credential helpers', () => {
    expect(DockerConfig.parse(JSON.stringify({'quay.io': {auth: b64('q:pw'), email: 'x@y'}})).credentialsFor('quay.io')).to.deep.equal({username: 'q', password: 'pw'})
    const helpers = DockerConfig.parse(JSON.stringify({credsStore: 'desktop', credHelpers: {'gcr.io': 'gcloud'}}))
    expect(helpers.registries()).to.deep.equal([])
  })

  it('treats an entry without credentials as none', () => {
    const config = DockerConfig.parse(JSON.stringify({auths: {'ghcr.io': {}}}))
    expect(config.credentialsFor('ghcr.io')).to.equal(undefined)
  })

  it('reports malformed files as Config errors naming the source', () => {
    expectConfigError(() => DockerConfig.parse('{not json', '/x/config.json'), /\/x\/config\.json is not valid JSON/)
    expectConfigError(() => DockerConfig.parse('[]', 'f'), /JSON object/)
    expectConfigError(() => DockerConfig.parse(JSON.stringify({auths: []}), 'f'), /"auths" must be an object/)
    expectConfigError(() => DockerConfig.parse(JSON.stringify({auths: {'a.io': 'x'}}), 'f'), /entry for "a.io"/)
    expectConfigError(() => DockerConfig.parse(JSON.stringify({auths: {'a.io': {auth: b64('nocolon')}}}), 'f'), /not base64 of "username:password"/)
    expectConfigError(() => DockerConfig.parse(JSON.stringify({auths: {'a.io': {auth: '***'}}}), 'f'), /not base64/)
    expectConfigError(() => DockerConfig.parse(JSON.stringify({auths: {'a.io': {username: 7}}}), 'f'), /"username" for "a.io" must be a string/)
  })

  describe('files', () => {
    let dir: string
    before(async () => {
      dir = await mkdtemp(path.join(os.tmpdir(), 'fnr-auth-'))
    })
    after(async () => {
      await rm(dir, {recursive: true, force: true})
    })

    it('loads a file, and a missing one is a Config error', async () => {
      const file = path.join(dir, 'config.json')
      await writeFile(file, JSON.stringify({auths: {'r.io': {auth: b64('u:p')}}}))
      const config = await DockerConfig.load(file)
      expect(config.source).to.equal(file)
      expect(config.credentialsFor('r.io')).to.deep.equal({username: 'u', password: 'p'})
      const missing = await DockerConfig.load(path.join(dir, 'nope.json')).then(
        () => undefined,
        (err: unknown) => err,
      )
      expect(missing).to.be.instanceOf(FnrError)
      expect((missing as FnrError).kind).to.equal('Config')
      expect((missing as FnrError).message).to.match(/nope\.json does not exist/)
    })
  })

  it('finds the default auth file from REGISTRY_AUTH_FILE, then DOCKER_CONFIG, then ~/.docker/config.json', () => {
    expect(defaultAuthFile({HOME: '/home/me'})).to.equal('/home/me/.docker/config.json')
    expect(defaultAuthFile({DOCKER_CONFIG: '/d'})).to.equal('/d/config.json')
    expect(defaultAuthFile({REGISTRY_AUTH_FILE: '/r.json', DOCKER_CONFIG: '/d'})).to.equal('/r.json')
  })

  it('builds Basic headers', () => {
    expect(basicAuthorization('u', 'p:w')).to.equal(`Basic ${b64('u:p:w')}`)
  })
})

describe('registry/auth: WWW-Authenticate', () => {
  it('parses a distribution Bearer challenge', () => {
    const [c] = parseWwwAuthenticate('Bearer realm="http://127.0.0.1:5600/token",service="test-registry",scope="repository:fn/hello:pull"')
    expect(c).to.deep.equal({scheme: 'bearer', params: {realm: 'http://127.0.0.1:5600/token', service: 'test-registry', scope: 'repository:fn/hello:pull'}})
  })

  it('parses error parameters, escapes, spaces and unquoted values', () => {
    const [c] = parseWwwAuthenticate('Bearer realm="https://auth.example/token" , service=registry.example, scope="repository:a/b:pull,push", error="insufficient_scope", x="q\\"uote"')
    expect(c!.params).to.deep.equal({realm: 'https://auth.example/token', service: 'registry.example', scope: 'repository:a/b:pull,push', error: 'insufficient_scope', x: 'q"uote'})
  })

  it('parses Basic and several challenges in one header or several headers', () => {
    expect(parseWwwAuthenticate('Basic realm="fnr-test-realm"')).to.deep.equal([{scheme: 'basic', params: {realm: 'fnr-test-realm'}}])
    const both = parseWwwAuthenticate('Basic realm="r", Bearer realm="https://t/token",service="s"')
    expect(both.map((c) => c.scheme)).to.deep.equal(['basic', 'bearer'])
    expect(both[1]!.params).to.deep.equal({realm: 'https://t/token', service: 's'})
    const many = parseWwwAuthenticate(['Basic realm="a"', 'Bearer realm="b"'])
    expect(many.map((c) => c.params.realm)).to.deep.equal(['a', 'b'])
  })

  it('returns nothing for an absent or empty header', () => {
    expect(parseWwwAuthenticate(undefined)).to.deep.equal([])
    expect(parseWwwAuthenticate('')).to.deep.equal([])
  })
})

describe('registry/auth: token cache', () => {
  it('keeps tokens until shortly before they expire and is bounded', () => {
    let now = 1_000_000
    const cache = new TokenCache(2, () => now)
    cache.set('a', 'ta', 60)
    expect(cache.get('a')).to.equal('ta')
    now += 53_000
    expect(cache.get('a')).to.equal('ta')
    now += 2_000 // 55 s: inside the 10% margin
    expect(cache.get('a')).to.equal(undefined)
    cache.set('a', 'ta', 300)
    cache.set('b', 'tb', 300)
    cache.set('c', 'tc', 300)
    expect(cache.get('a')).to.equal(undefined)
    expect(cache.get('b')).to.equal('tb')
    expect(cache.get('c')).to.equal('tc')
    cache.delete('b')
    expect(cache.get('b')).to.equal(undefined)
  })
})
