/**
 * Image names as fnr reads them (src/lib/config/image-ref.ts) and as FunctionConfigs match them
 * (src/lib/config/function-config-crd.ts): the default prefix, the console name kpt shows, Docker
 * Hub's names, registries with ports, and a request split into repository, name, tag and digest.
 */
import {expect} from 'chai'

import {normaliseRepository, objectKey, splitRequestImage} from '../../src/lib/config/function-config-crd.js'
import {DEFAULT_IMAGE_PREFIX, displayImage, normaliseImage, withPrefix} from '../../src/lib/config/image-ref.js'

const DIGEST = `sha256:${'a'.repeat(64)}`

describe('image names', () => {
  it('withPrefix joins with one slash, and an empty prefix adds nothing', () => {
    expect(withPrefix('gcr.io/kpt-fn', 'x')).to.equal('gcr.io/kpt-fn/x')
    expect(withPrefix('gcr.io/kpt-fn/', 'x')).to.equal('gcr.io/kpt-fn/x')
    expect(withPrefix('', 'x')).to.equal('x')
  })

  it('displayImage: a name without "/" gets the default prefix, as kpt shows it; anything else is kept as written', () => {
    expect(DEFAULT_IMAGE_PREFIX).to.equal('ghcr.io/kptdev/krm-functions-catalog/')
    expect(displayImage('set-namespace:v0.4')).to.equal('ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4')
    expect(displayImage('set-namespace', 'gcr.io/kpt-fn')).to.equal('gcr.io/kpt-fn/set-namespace')
    expect(displayImage('Example.com/Fn')).to.equal('Example.com/Fn')
  })

  it('normaliseImage: registries with a port or localhost, lower-cased hosts, Docker Hub\'s aliases, :latest, and digests', () => {
    expect(normaliseImage('localhost:5000/fn')).to.equal('localhost:5000/fn:latest')
    expect(normaliseImage('localhost/fn:v1')).to.equal('localhost/fn:v1')
    expect(normaliseImage('Registry.Example.com/team/fn:v1')).to.equal('registry.example.com/team/fn:v1')
    expect(normaliseImage('index.docker.io/nginx')).to.equal('docker.io/library/nginx:latest')
    expect(normaliseImage('registry-1.docker.io/user/app:2')).to.equal('docker.io/user/app:2')
    expect(normaliseImage('user/app')).to.equal('docker.io/user/app:latest')
    expect(normaliseImage(`ghcr.io/o/fn@${DIGEST}`)).to.equal(`ghcr.io/o/fn@${DIGEST}`)
    expect(normaliseImage(`ghcr.io/o/fn:v1@${DIGEST}`)).to.equal(`ghcr.io/o/fn:v1@${DIGEST}`)
    expect(normaliseImage('  ghcr.io/o/fn:v1  ')).to.equal('ghcr.io/o/fn:v1')
  })

  it('splits a request image into repository, name, tag and digest (normalised first)', () => {
    expect(splitRequestImage('set-labels:v0.2', DEFAULT_IMAGE_PREFIX)).to.deep.equal({repository: 'ghcr.io/kptdev/krm-functions-catalog', name: 'set-labels', tag: 'v0.2', digest: ''})
    expect(splitRequestImage('set-labels', 'gcr.io/kpt-fn')).to.deep.equal({repository: 'gcr.io/kpt-fn', name: 'set-labels', tag: 'latest', digest: ''})
    expect(splitRequestImage(`localhost:5000/a/b@${DIGEST}`, DEFAULT_IMAGE_PREFIX)).to.deep.equal({repository: 'localhost:5000/a', name: 'b', tag: '', digest: DIGEST})
    expect(splitRequestImage('nginx', '')).to.deep.equal({repository: 'docker.io/library', name: 'nginx', tag: 'latest', digest: ''})
  })

  it('normaliseRepository: a FunctionConfig prefix as a normalised repository, the default one when blank', () => {
    expect(normaliseRepository('gcr.io/kpt-fn/', DEFAULT_IMAGE_PREFIX)).to.equal('gcr.io/kpt-fn')
    expect(normaliseRepository('  ', DEFAULT_IMAGE_PREFIX)).to.equal('ghcr.io/kptdev/krm-functions-catalog')
    expect(normaliseRepository('index.docker.io/user', DEFAULT_IMAGE_PREFIX)).to.equal('docker.io/user')
    expect(normaliseRepository('Registry.Example.com:5000/team', DEFAULT_IMAGE_PREFIX)).to.equal('registry.example.com:5000/team')
  })

  it('a FunctionConfig\'s key is namespace/name, empty parts kept', () => {
    expect(objectKey({apiVersion: 'config.porch.kpt.dev/v1alpha1', kind: 'FunctionConfig', metadata: {namespace: 'porch-fn-system', name: 'set-labels'}} as Parameters<typeof objectKey>[0])).to.equal('porch-fn-system/set-labels')
    expect(objectKey({metadata: {name: 'x'}} as Parameters<typeof objectKey>[0])).to.equal('/x')
  })
})
