import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import {isDockerHub, normaliseRegistryHost, parseImageReference, registryApiHost} from '../../src/lib/registry/reference.js'

const DIGEST = `sha256:${'a'.repeat(64)}`

describe('registry/reference', () => {
  const cases: Array<[string, {registry: string; repository: string; tag?: string; digest?: string; text: string}]> = [
    ['alpine', {registry: 'docker.io', repository: 'library/alpine', tag: 'latest', text: 'docker.io/library/alpine:latest'}],
    ['alpine:3.20', {registry: 'docker.io', repository: 'library/alpine', tag: '3.20', text: 'docker.io/library/alpine:3.20'}],
    ['library/alpine', {registry: 'docker.io', repository: 'library/alpine', tag: 'latest', text: 'docker.io/library/alpine:latest'}],
    ['bitnami/kubectl:1.30', {registry: 'docker.io', repository: 'bitnami/kubectl', tag: '1.30', text: 'docker.io/bitnami/kubectl:1.30'}],
    ['docker.io/alpine', {registry: 'docker.io', repository: 'library/alpine', tag: 'latest', text: 'docker.io/library/alpine:latest'}],
    ['index.docker.io/library/alpine:edge', {registry: 'docker.io', repository: 'library/alpine', tag: 'edge', text: 'docker.io/library/alpine:edge'}],
    ['registry-1.docker.io/org/fn', {registry: 'docker.io', repository: 'org/fn', tag: 'latest', text: 'docker.io/org/fn:latest'}],
    [
      'ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.2.2',
      {registry: 'ghcr.io', repository: 'kptdev/krm-functions-catalog/set-labels', tag: 'v0.2.2', text: 'ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.2.2'},
    ],
    ['127.0.0.1:5000/fn/hello', {registry: '127.0.0.1:5000', repository: 'fn/hello', tag: 'latest', text: '127.0.0.1:5000/fn/hello:latest'}],
    ['localhost/fn', {registry: 'localhost', repository: 'fn', tag: 'latest', text: 'localhost/fn:latest'}],
    ['localhost:5000/fn:v1', {registry: 'localhost:5000', repository: 'fn', tag: 'v1', text: 'localhost:5000/fn:v1'}],
    ['Registry.Example.COM/team/fn:V1_x', {registry: 'registry.example.com', repository: 'team/fn', tag: 'V1_x', text: 'registry.example.com/team/fn:V1_x'}],
    ['[::1]:5000/fn:v1', {registry: '[::1]:5000', repository: 'fn', tag: 'v1', text: '[::1]:5000/fn:v1'}],
    ['gcr.io/kpt-fn/my_function__x.y-z:latest', {registry: 'gcr.io', repository: 'kpt-fn/my_function__x.y-z', tag: 'latest', text: 'gcr.io/kpt-fn/my_function__x.y-z:latest'}],
    [`ghcr.io/org/fn@${DIGEST}`, {registry: 'ghcr.io', repository: 'org/fn', digest: DIGEST, text: `ghcr.io/org/fn@${DIGEST}`}],
    [`ghcr.io/org/fn:v1@${DIGEST}`, {registry: 'ghcr.io', repository: 'org/fn', tag: 'v1', digest: DIGEST, text: `ghcr.io/org/fn:v1@${DIGEST}`}],
    [`127.0.0.1:5000/fn@${DIGEST}`, {registry: '127.0.0.1:5000', repository: 'fn', digest: DIGEST, text: `127.0.0.1:5000/fn@${DIGEST}`}],
  ]

  for (const [input, want] of cases) {
    it(`parses ${input}`, () => {
      const ref = parseImageReference(input)
      expect(ref.registry).to.equal(want.registry)
      expect(ref.repository).to.equal(want.repository)
      expect(ref.tag).to.equal(want.tag)
      expect(ref.digest).to.equal(want.digest)
      expect(ref.toString()).to.equal(want.text)
      expect(ref.input).to.equal(input)
      expect(ref.identifier).to.equal(want.digest ?? want.tag)
    })
  }

  const bad: Array<[string, RegExp]> = [
    ['', /empty/],
    ['   ', /empty/],
    ['Alpine', /lower case/],
    ['docker.io/Org/fn', /lower case/],
    ['ghcr.io//fn', /empty path component/],
    ['ghcr.io/fn/', /empty path component/],
    ['https://ghcr.io/fn', /no scheme/],
    ['ghcr.io/fn:', /tag/],
    ['ghcr.io/fn:-bad', /tag/],
    [`ghcr.io/fn:${'x'.repeat(129)}`, /tag/],
    ['ghcr.io/fn@sha256:abc', /64/],
    ['ghcr.io/fn@md5:abcdef', /not supported/],
    ['ghcr.io/fn@', /digest/],
    ['invalid@oci@ref', /digest/],
    ['ghcr.io/fn name', /whitespace/],
    ['host:99999/fn', /out of range/],
    ['bad_host.io:x/fn', /registry host|tag|path component/],
    [`r.io/${'a'.repeat(260)}`, /longer than 255/],
  ]
  for (const [input, reason] of bad) {
    it(`rejects ${JSON.stringify(input.length > 40 ? `${input.slice(0, 40)}…` : input)}`, () => {
      let caught: unknown
      try {
        parseImageReference(input)
      } catch (err) {
        caught = err
      }
      expect(caught).to.be.instanceOf(FnrError)
      expect((caught as FnrError).kind).to.equal('InvalidArgument')
      expect((caught as FnrError).message).to.match(/^invalid image reference /)
      expect((caught as FnrError).message).to.match(reason)
    })
  }

  it('normalises registry hosts as docker config keys are written', () => {
    expect(normaliseRegistryHost('https://index.docker.io/v1/')).to.equal('docker.io')
    expect(normaliseRegistryHost('registry-1.docker.io')).to.equal('docker.io')
    expect(normaliseRegistryHost('registry.hub.docker.com')).to.equal('docker.io')
    expect(normaliseRegistryHost('HTTPS://GHCR.io/')).to.equal('ghcr.io')
    expect(normaliseRegistryHost('http://127.0.0.1:5000/v2/')).to.equal('127.0.0.1:5000')
    expect(isDockerHub('index.docker.io')).to.equal(true)
    expect(isDockerHub('ghcr.io')).to.equal(false)
  })

  it('serves Docker Hub from registry-1.docker.io and others from their own host', () => {
    expect(registryApiHost('docker.io')).to.equal('registry-1.docker.io')
    expect(parseImageReference('alpine').apiHost).to.equal('registry-1.docker.io')
    expect(parseImageReference('127.0.0.1:5000/x').apiHost).to.equal('127.0.0.1:5000')
  })

  it('pins a digest while keeping the tag for display', () => {
    const ref = parseImageReference('ghcr.io/org/fn:v1').withDigest(DIGEST)
    expect(ref.toString()).to.equal(`ghcr.io/org/fn:v1@${DIGEST}`)
    expect(ref.identifier).to.equal(DIGEST)
    expect(ref.isDigest).to.equal(true)
  })
})
