/**
 * RegistryClient against a real docker-registry without auth (plain HTTP, listed as insecure):
 * manifest formats, platform selection, the command rule, errors, retries, timeouts and the cache.
 */
import {createHash} from 'node:crypto'

import {expect} from 'chai'

import {MediaType} from '../../src/lib/registry/image-config.js'
import {RegistryClient, type RegistryClientOptions} from '../../src/lib/registry/client.js'
import {expectFnrError} from '../support/registry/assert.js'
import {pushImage, seedImages, type SeededImages} from '../support/registry/fixtures.js'
import {skopeoRawManifest} from '../support/registry/oci-layout.js'
import {RegistryProxy} from '../support/registry/proxy.js'
import {TestRegistry} from '../support/registry/registry.js'

const sha = (b: Buffer): string => `sha256:${createHash('sha256').update(b).digest('hex')}`

describe('registry client: docker-registry without auth', function () {
  let registry: TestRegistry
  let images: SeededImages
  const clients: RegistryClient[] = []
  const proxies: RegistryProxy[] = []

  function client(options: RegistryClientOptions = {}): RegistryClient {
    const c = new RegistryClient({insecureRegistries: [registry.host], retryDelayMs: 5, ...options})
    clients.push(c)
    return c
  }

  async function proxy(): Promise<RegistryProxy> {
    const p = await RegistryProxy.start(registry.port)
    proxies.push(p)
    return p
  }

  before(async function () {
    registry = await TestRegistry.start({mode: 'none'})
    images = await seedImages(registry, {full: true})
  })

  after(async function () {
    for (const c of clients) c.close()
    for (const p of proxies) await p.stop()
    await registry?.stop()
  })

  describe('manifest formats', function () {
    it('resolves an OCI image manifest: digest, media type, platform, config, Entrypoint + Cmd, size', async function () {
      const meta = await client().inspect(`${registry.host}/fn/hello:v1`)
      expect(meta.image).to.equal(`${registry.host}/fn/hello:v1`)
      expect(meta.reference).to.equal(`${registry.host}/fn/hello:v1`)
      expect(meta.registry).to.equal(registry.host)
      expect(meta.repository).to.equal('fn/hello')
      expect(meta.tag).to.equal('v1')
      expect(meta.digest).to.equal(images.hello.manifest.digest)
      expect(meta.mediaType).to.equal(MediaType.OciManifest)
      expect(meta.index).to.equal(undefined)
      expect(meta.pinnedReference).to.equal(`${registry.host}/fn/hello@${images.hello.manifest.digest}`)
      expect(meta.platform).to.deep.equal({os: 'linux', architecture: 'amd64'})
      expect(meta.configDigest).to.equal(images.hello.config.digest)
      expect(meta.entrypoint).to.deep.equal(['/bin/fn'])
      expect(meta.cmd).to.deep.equal(['--verbose'])
      expect(meta.command).to.deep.equal(['/bin/fn', '--verbose'])
      expect(meta.size).to.equal(images.hello.config.size + images.hello.layers[0]!.size)
      expect(meta.layers).to.equal(1)
      expect(meta.created).to.equal('2026-01-01T00:00:00Z')
    })

    it('resolves a Docker v2 schema 2 manifest (digest checked against skopeo)', async function () {
      const raw = await skopeoRawManifest(registry, 'fn/hello:docker')
      const meta = await client().inspect(`${registry.host}/fn/hello:docker`)
      expect(meta.mediaType).to.equal(MediaType.DockerManifest)
      expect(meta.digest).to.equal(sha(raw))
      expect(meta.command).to.deep.equal(['/bin/fn', '--verbose'])
    })

    it('picks linux/amd64 from an OCI index by default, and another platform when asked', async function () {
      const c = client()
      const amd = await c.inspect(`${registry.host}/fn/multi:v1`)
      expect(amd.digest).to.equal(images.multi.images[0]!.manifest.digest)
      expect(amd.mediaType).to.equal(MediaType.OciManifest)
      expect(amd.index).to.deep.equal({digest: images.multi.index.digest, mediaType: MediaType.OciIndex, platforms: ['linux/amd64', 'linux/arm64']})
      expect(amd.pinnedReference).to.equal(`${registry.host}/fn/multi@${images.multi.index.digest}`)
      expect(amd.platform).to.deep.equal({os: 'linux', architecture: 'amd64'})
      expect(amd.command).to.deep.equal(['/fn-amd64'])
      const arm = await c.inspect(`${registry.host}/fn/multi:v1`, {platform: 'linux/arm64'})
      expect(arm.digest).to.equal(images.multi.images[1]!.manifest.digest)
      expect(arm.platform).to.deep.equal({os: 'linux', architecture: 'arm64'})
      expect(arm.command).to.deep.equal(['/fn-arm64'])
      const armByDefault = await client({platform: 'linux/arm64/v8'}).inspect(`${registry.host}/fn/multi:v1`)
      expect(armByDefault.digest).to.equal(arm.digest)
    })

    it('picks the platform from a Docker manifest list itself', async function () {
      const raw = await skopeoRawManifest(registry, 'fn/multi:list')
      const meta = await client().inspect(`${registry.host}/fn/multi:list`)
      expect(meta.index?.mediaType).to.equal(MediaType.DockerManifestList)
      expect(meta.index?.digest).to.equal(sha(raw))
      expect(meta.mediaType).to.equal(MediaType.DockerManifest)
      expect(meta.command).to.deep.equal(['/fn-amd64'])
      expect((await client({platform: 'linux/arm64'}).inspect(`${registry.host}/fn/multi:list`)).command).to.deep.equal(['/fn-arm64'])
    })

    it('reports a platform the image does not have, for an index and for a single manifest', async function () {
      await expectFnrError(
        client({platform: 'linux/s390x'}).inspect(`${registry.host}/fn/multi:v1`),
        'NotFound',
        `image "${registry.host}/fn/multi:v1" has no linux/s390x variant in registry ${registry.host} (it has: linux/amd64, linux/arm64)`,
      )
      await expectFnrError(client().inspect(`${registry.host}/fn/arm-only:v1`), 'NotFound', `image "${registry.host}/fn/arm-only:v1" is linux/arm64 only, not linux/amd64 (registry ${registry.host})`)
      expect((await client({platform: 'linux/arm64'}).inspect(`${registry.host}/fn/arm-only:v1`)).command).to.deep.equal(['/fn'])
    })

    it('resolves digest references, with or without a tag', async function () {
      const c = client()
      const byDigest = await c.inspect(`${registry.host}/fn/hello@${images.hello.manifest.digest}`)
      expect(byDigest.digest).to.equal(images.hello.manifest.digest)
      expect(byDigest.tag).to.equal(undefined)
      const both = await c.inspect(`${registry.host}/fn/multi:ignored@${images.multi.index.digest}`)
      expect(both.digest).to.equal(images.multi.images[0]!.manifest.digest)
      const platformManifest = await c.inspect(`${registry.host}/fn/multi@${images.multi.images[1]!.manifest.digest}`, {platform: 'linux/arm64'})
      expect(platformManifest.command).to.deep.equal(['/fn-arm64'])
    })
  })

  describe('what the wrapper runs', function () {
    it('runs Entrypoint alone, Cmd alone, and refuses an image with neither', async function () {
      const c = client()
      expect((await c.inspect(`${registry.host}/fn/entry-only:v1`)).command).to.deep.equal(['/usr/local/bin/function'])
      const cmdOnly = await c.inspect(`${registry.host}/fn/cmd-only:v1`)
      expect(cmdOnly.entrypoint).to.deep.equal([])
      expect(cmdOnly.command).to.deep.equal(['/bin/sh', '-c', 'cat'])
      await expectFnrError(
        c.inspect(`${registry.host}/fn/neither:v1`),
        'FailedPrecondition',
        `image "${registry.host}/fn/neither:v1" has neither Entrypoint nor Cmd in its config, so there is no function to run`,
      )
      const meta = await c.inspect(`${registry.host}/fn/neither:v1`, {requireCommand: false})
      expect(meta.command).to.deep.equal([])
      expect(meta.digest).to.equal(images.neither!.manifest.digest)
    })
  })

  describe('errors', function () {
    it('reports a missing tag, repository and digest as NotFound naming the image and registry', async function () {
      const c = client()
      await expectFnrError(
        c.inspect(`${registry.host}/fn/hello:nope`),
        'NotFound',
        `image "${registry.host}/fn/hello:nope" not found in registry ${registry.host} (MANIFEST_UNKNOWN: manifest unknown)`,
      )
      await expectFnrError(c.inspect(`${registry.host}/fn/nothing-here:v1`), 'NotFound', new RegExp(`^image "${registry.host}/fn/nothing-here:v1" not found in registry ${registry.host} \\(`))
      await expectFnrError(c.inspect(`${registry.host}/fn/hello@sha256:${'0'.repeat(64)}`), 'NotFound', /not found in registry/)
    })

    it('rejects a malformed reference before any request', async function () {
      await expectFnrError(client().inspect(`${registry.host}/Fn/Hello:v1`), 'InvalidArgument', /lower case/)
    })

    it('never falls back to plain HTTP for a registry that is not listed as insecure', async function () {
      const p = await proxy()
      await expectFnrError(
        new RegistryClient({retries: 0}).inspect(`${p.host}/fn/hello:v1`),
        'FailedPrecondition',
        `TLS handshake with registry ${p.host} failed for image "${p.host}/fn/hello:v1": the server does not speak TLS (if it serves plain HTTP, list it as an insecure registry)`,
      )
      expect(p.records, 'no plain-HTTP request reached the registry').to.deep.equal([])
    })

    it('reports a registry that is down as Unavailable after bounded retries', async function () {
      const down = await TestRegistry.start({mode: 'none'})
      const host = down.host
      await down.stop()
      const c = client({insecureRegistries: [host], retries: 2})
      await expectFnrError(c.inspect(`${host}/fn/hello:v1`), 'Unavailable', new RegExp(`^registry ${host} is unreachable for image "${host}/fn/hello:v1": connect ECONNREFUSED 127\\.0\\.0\\.1:\\d+ \\(3 attempts\\)$`))
    })

    it('retries 5xx and 429 answers and succeeds when the registry recovers', async function () {
      const p = await proxy()
      const c = client({insecureRegistries: [p.host], retries: 2})
      p.failNext = 2
      const meta = await c.inspect(`${p.host}/fn/hello:v1`)
      expect(meta.digest).to.equal(images.hello.manifest.digest)
      const manifestGets = p.records.filter((r) => r.method === 'GET' && r.path === '/v2/fn/hello/manifests/v1')
      expect(manifestGets).to.have.length(3)
      p.clear()
      p.failStatus = 429
      p.failNext = 1
      expect((await client({insecureRegistries: [p.host]}).inspect(`${p.host}/fn/multi:v1`)).command).to.deep.equal(['/fn-amd64'])
      p.failStatus = 503
    })

    it('gives up on persistent 5xx with Unavailable', async function () {
      const p = await proxy()
      p.failNext = 100
      await expectFnrError(
        client({insecureRegistries: [p.host], retries: 1}).inspect(`${p.host}/fn/hello:v1`),
        'Unavailable',
        `registry ${p.host} answered 503 (UNAVAILABLE: injected failure) for image "${p.host}/fn/hello:v1" (2 attempts)`,
      )
    })

    it('ends a request that gets no answer with DeadlineExceeded, and honours the caller\'s signal', async function () {
      const p = await proxy()
      p.hang = true
      await expectFnrError(
        client({insecureRegistries: [p.host], retries: 0, requestTimeoutMs: 300}).inspect(`${p.host}/fn/hello:v1`),
        'DeadlineExceeded',
        `registry ${p.host} did not answer within 300ms for image "${p.host}/fn/hello:v1" (1 attempts)`,
      )
      await expectFnrError(
        client({insecureRegistries: [p.host], requestTimeoutMs: 60_000}).inspect(`${p.host}/fn/hello:v2`, {signal: AbortSignal.timeout(200)}),
        'DeadlineExceeded',
        /^timed out talking to registry/,
      )
      const controller = new AbortController()
      const pending = client({insecureRegistries: [p.host], requestTimeoutMs: 60_000}).inspect(`${p.host}/fn/hello:v3`, {signal: controller.signal})
      controller.abort()
      await expectFnrError(pending, 'Cancelled', /^cancelled while talking to registry/)
    })

    it('follows blob redirects to another origin', async function () {
      const p = await proxy()
      p.redirectBlobs = true
      const meta = await client({insecureRegistries: [p.host]}).inspect(`${p.host}/fn/hello:v1`)
      expect(meta.configDigest).to.equal(images.hello.config.digest)
      expect(p.records.filter((r) => r.origin === 'blob').map((r) => r.path)).to.deep.equal([`/_redirected/v2/fn/hello/blobs/${images.hello.config.digest}`])
    })
  })

  describe('metadata cache', function () {
    it('answers repeated calls from the cache and re-checks a tag with one HEAD after revalidateAfterMs', async function () {
      const p = await proxy()
      let now = 1_000_000
      const c = client({insecureRegistries: [p.host], revalidateAfterMs: 60_000, now: () => now})
      const first = await c.inspect(`${p.host}/fn/hello:v1`)
      const firstRequests = p.records.length
      expect(firstRequests).to.be.greaterThan(0)
      expect(await c.inspect(`${p.host}/fn/hello:v1`)).to.deep.equal(first)
      expect(p.records.length).to.equal(firstRequests)
      now += 61_000
      p.clear()
      expect(await c.inspect(`${p.host}/fn/hello:v1`)).to.deep.equal(first)
      expect(p.records.map((r) => `${r.method} ${r.path}`)).to.deep.equal(['HEAD /v2/fn/hello/manifests/v1'])
    })

    it('treats the digest as the truth when a tag moves', async function () {
      const p = await proxy()
      let now = 1_000_000
      const c = client({insecureRegistries: [p.host], revalidateAfterMs: 60_000, now: () => now})
      const a = await pushImage(registry, 'fn/moving:v1', {entrypoint: ['/first'], files: {'1': 'first'}})
      expect((await c.inspect(`${p.host}/fn/moving:v1`)).digest).to.equal(a.manifest.digest)
      const b = await pushImage(registry, 'fn/moving:v1', {entrypoint: ['/second'], files: {'2': 'second'}})
      expect((await c.inspect(`${p.host}/fn/moving:v1`)).digest, 'still within revalidateAfterMs').to.equal(a.manifest.digest)
      now += 61_000
      const moved = await c.inspect(`${p.host}/fn/moving:v1`)
      expect(moved.digest).to.equal(b.manifest.digest)
      expect(moved.command).to.deep.equal(['/second'])
      // Moving back is answered from the digest-keyed entry after one HEAD.
      await pushImage(registry, 'fn/moving:v1', {entrypoint: ['/first'], files: {'1': 'first'}})
      now += 61_000
      p.clear()
      const back = await c.inspect(`${p.host}/fn/moving:v1`)
      expect(back.digest).to.equal(a.manifest.digest)
      expect(back.command).to.deep.equal(['/first'])
      expect(p.records.map((r) => r.method)).to.deep.equal(['HEAD'])
    })

    it('keeps serving cached metadata when the re-check fails because the registry is down, and re-checks with GET when HEAD is refused', async function () {
      const p = await proxy()
      let now = 1_000_000
      const c = client({insecureRegistries: [p.host], revalidateAfterMs: 1000, retries: 1, now: () => now})
      const first = await c.inspect(`${p.host}/fn/hello:v1`)
      now += 2000
      p.failNext = 100
      expect(await c.inspect(`${p.host}/fn/hello:v1`)).to.deep.equal(first)
      p.failNext = 0
      p.clear()
      now += 2000
      p.failStatus = 405
      p.failNext = 1
      expect(await c.inspect(`${p.host}/fn/hello:v1`)).to.deep.equal(first)
      expect(p.records.map((r) => r.method)).to.deep.equal(['HEAD', 'GET', 'GET'])
      p.failStatus = 503
      // A tag that disappeared is NotFound, not stale data.
      await c.inspect(`${p.host}/fn/other:v1`)
      now += 2000
      p.failStatus = 404
      p.failNext = 1
      await expectFnrError(c.inspect(`${p.host}/fn/other:v1`), 'NotFound')
      p.failStatus = 503
    })

    it('never re-checks digest references, and Infinity never re-checks tags (Porch behaviour)', async function () {
      const p = await proxy()
      let now = 0
      const c = client({insecureRegistries: [p.host], revalidateAfterMs: Infinity, now: () => now})
      await c.inspect(`${p.host}/fn/hello@${images.hello.manifest.digest}`)
      await c.inspect(`${p.host}/fn/hello:v1`)
      p.clear()
      now += 10 * 365 * 24 * 3600_000
      await c.inspect(`${p.host}/fn/hello@${images.hello.manifest.digest}`)
      await c.inspect(`${p.host}/fn/hello:v1`)
      expect(p.records).to.deep.equal([])
    })

    it('shares one resolution between concurrent calls and is bounded', async function () {
      const p = await proxy()
      const c = client({insecureRegistries: [p.host], cacheSize: 2})
      const results = await Promise.all([1, 2, 3].map(() => c.inspect(`${p.host}/fn/multi:v1`)))
      expect(new Set(results.map((r) => r.digest)).size).to.equal(1)
      expect(p.records.filter((r) => r.path === '/v2/fn/multi/manifests/v1')).to.have.length(1)
      // The index entry and its digest-keyed twin fill the cache; another image evicts them.
      await c.inspect(`${p.host}/fn/hello:v1`)
      p.clear()
      await c.inspect(`${p.host}/fn/multi:v1`)
      expect(p.records.filter((r) => r.path === '/v2/fn/multi/manifests/v1')).to.have.length(1)
    })
  })
})
