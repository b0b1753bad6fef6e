/**
 * src/lib/registry/image-config.ts, in process: media types, platforms (aliases, default variants,
 * index selection) and the command fnr runs for an image (docs/image-inspect.md). The integration
 * spec test/registry/tls-and-image-config.test.ts has the basic cases; these are the rest.
 */
import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import {
  DEFAULT_PLATFORM,
  formatPlatform,
  isImageManifestMediaType,
  isIndexMediaType,
  listPlatforms,
  MANIFEST_ACCEPT,
  MediaType,
  normalisePlatform,
  parsePlatform,
  requireFunctionCommand,
  selectPlatformEntry,
  shellQuote,
  type IndexEntry,
} from '../../src/lib/registry/image-config.js'

describe('registry/image-config: media types', () => {
  it('asks for all four manifest types at once, indexes first', () => {
    expect(MANIFEST_ACCEPT.split(', ')).to.deep.equal([MediaType.OciIndex, MediaType.DockerManifestList, MediaType.OciManifest, MediaType.DockerManifest])
  })

  it('tells indexes from image manifests, and knows neither schema 1 nor configs', () => {
    expect(isIndexMediaType(MediaType.OciIndex)).to.equal(true)
    expect(isIndexMediaType(MediaType.DockerManifestList)).to.equal(true)
    expect(isImageManifestMediaType(MediaType.OciManifest)).to.equal(true)
    expect(isImageManifestMediaType(MediaType.DockerManifest)).to.equal(true)
    for (const t of [MediaType.OciManifest, MediaType.DockerManifest, MediaType.DockerSchema1Signed, MediaType.OciConfig, '']) expect(isIndexMediaType(t), t).to.equal(false)
    for (const t of [MediaType.OciIndex, MediaType.DockerManifestList, MediaType.DockerSchema1, MediaType.DockerConfig, `${MediaType.OciManifest}; charset=utf-8`]) {
      expect(isImageManifestMediaType(t), t).to.equal(false)
    }
  })
})

describe('registry/image-config: platforms', () => {
  it('defaults to linux/amd64', () => {
    expect(DEFAULT_PLATFORM).to.deep.equal({os: 'linux', architecture: 'amd64'})
  })

  it('normalises architecture aliases, drops arm64\'s v8 and an empty variant', () => {
    expect(normalisePlatform({os: 'linux', architecture: 'aarch64', variant: 'v8'})).to.deep.equal({os: 'linux', architecture: 'arm64'})
    expect(normalisePlatform({os: 'linux', architecture: 'armhf', variant: 'v7'})).to.deep.equal({os: 'linux', architecture: 'arm', variant: 'v7'})
    expect(normalisePlatform({os: 'linux', architecture: 'armel'})).to.deep.equal({os: 'linux', architecture: 'arm'})
    expect(normalisePlatform({os: 'linux', architecture: 'i386'})).to.deep.equal({os: 'linux', architecture: '386'})
    expect(normalisePlatform({os: 'linux', architecture: 'x86-64', variant: ''})).to.deep.equal({os: 'linux', architecture: 'amd64'})
    // arm64 keeps other variants
    expect(normalisePlatform({os: 'linux', architecture: 'arm64', variant: 'v9'})).to.deep.equal({os: 'linux', architecture: 'arm64', variant: 'v9'})
    // no variant key at all when there is none
    expect(normalisePlatform({os: 'linux', architecture: 'amd64', variant: undefined})).not.to.have.property('variant')
  })

  it('parses with surrounding spaces, and refuses empty parts and odd characters as InvalidArgument', () => {
    expect(parsePlatform('  linux/aarch64  ')).to.deep.equal({os: 'linux', architecture: 'arm64'})
    for (const bad of ['', 'linux/amd64/', '/amd64', 'linux//v7', 'linux/amd64+x', 'linux/arm/v7/extra']) {
      let err: unknown
      try {
        parsePlatform(bad)
      } catch (e) {
        err = e
      }
      expect(err, bad).to.be.instanceOf(FnrError)
      expect((err as FnrError).kind).to.equal('InvalidArgument')
      expect((err as FnrError).message).to.equal(`invalid platform ${JSON.stringify(bad)}: expected os/architecture[/variant], e.g. linux/amd64 or linux/arm64/v8`)
    }
  })

  it('formats os/architecture[/variant]', () => {
    expect(formatPlatform({os: 'linux', architecture: 'amd64'})).to.equal('linux/amd64')
    expect(formatPlatform({os: 'linux', architecture: 'arm', variant: 'v7'})).to.equal('linux/arm/v7')
    expect(formatPlatform({os: 'linux', architecture: 'arm', variant: ''})).to.equal('linux/arm')
  })

  it('lists what an index offers, without attestations or entries without a platform', () => {
    const entries: IndexEntry[] = [
      {digest: 'a', platform: {os: 'linux', architecture: 'amd64'}},
      {digest: 'b', platform: {os: 'unknown', architecture: 'unknown'}},
      {digest: 'c', platform: {os: 'linux', architecture: 'arm', variant: 'v7'}},
      {digest: 'd'},
      {digest: 'e', platform: {os: 'linux'}},
    ]
    expect(listPlatforms(entries)).to.deep.equal(['linux/amd64', 'linux/arm/v7'])
    expect(listPlatforms([])).to.deep.equal([])
  })
})

describe('registry/image-config: selecting an index entry', () => {
  const e = (digest: string, architecture: string, variant?: string): IndexEntry => ({digest, platform: {os: 'linux', architecture, ...(variant === undefined ? {} : {variant})}})

  it('without a variant asked, prefers the entry without a variant, then the default variant (arm: v7), then the first', () => {
    expect(selectPlatformEntry([e('v6', 'arm', 'v6'), e('none', 'arm'), e('v7', 'arm', 'v7')], {os: 'linux', architecture: 'arm'})?.digest).to.equal('none')
    expect(selectPlatformEntry([e('v6', 'arm', 'v6'), e('v7', 'arm', 'v7')], {os: 'linux', architecture: 'arm'})?.digest).to.equal('v7')
    expect(selectPlatformEntry([e('v6', 'arm', 'v6'), e('v5', 'arm', 'v5')], {os: 'linux', architecture: 'arm'})?.digest).to.equal('v6')
  })

  it('matches an entry by its aliases, and a variant asked must match exactly', () => {
    expect(selectPlatformEntry([e('x', 'x86_64')], DEFAULT_PLATFORM)?.digest).to.equal('x')
    expect(selectPlatformEntry([e('a', 'aarch64', 'v8')], {os: 'linux', architecture: 'arm64', variant: 'v8'})?.digest).to.equal('a')
    expect(selectPlatformEntry([e('none', 'arm')], {os: 'linux', architecture: 'arm', variant: 'v7'})).to.equal(undefined)
  })

  it('never picks an entry without os or architecture, nor one of another os', () => {
    expect(selectPlatformEntry([{digest: 'a'}, {digest: 'b', platform: {architecture: 'amd64'}}, {digest: 'c', platform: {os: 'windows', architecture: 'amd64'}}], DEFAULT_PLATFORM)).to.equal(undefined)
    expect(selectPlatformEntry([], DEFAULT_PLATFORM)).to.equal(undefined)
  })
})

describe('registry/image-config: the function command', () => {
  it('returns Entrypoint then Cmd as a new array', () => {
    const entrypoint = ['/fn']
    const command = requireFunctionCommand('r.io/x:v1', entrypoint, ['--flag'])
    expect(command).to.deep.equal(['/fn', '--flag'])
    command.push('changed')
    expect(entrypoint).to.deep.equal(['/fn'])
  })

  it('refuses an image with neither Entrypoint nor Cmd as FailedPrecondition', () => {
    let err: unknown
    try {
      requireFunctionCommand('r.io/x:v1', [], [])
    } catch (e) {
      err = e
    }
    expect(err).to.be.instanceOf(FnrError)
    expect((err as FnrError).kind).to.equal('FailedPrecondition')
    expect((err as FnrError).message).to.equal('image "r.io/x:v1" has neither Entrypoint nor Cmd in its config, so there is no function to run')
  })

  it('shell-quotes for display only what needs it', () => {
    expect(shellQuote(['/usr/bin/fn', '--a=b', 'x,y:z@1%2+3', 'a_b.c'])).to.equal('/usr/bin/fn --a=b x,y:z@1%2+3 a_b.c')
    expect(shellQuote(['a b', '$HOME', '*', 'é'])).to.equal("'a b' '$HOME' '*' 'é'")
    expect(shellQuote([])).to.equal('')
  })
})
