/**
 * The labels, annotations and selectors fnr puts on function pods and their Services
 * (src/lib/pods/model/naming.ts): one definition for the runner and `fnr pods warm`, so either kind
 * of pod is found, adopted and collected the same way. Pod names themselves are in ./naming.test.ts.
 */
import {createHash} from 'node:crypto'

import {expect} from 'chai'

import {
  defaultRunnerIdentity,
  functionPodAnnotations,
  functionPodLabels,
  functionServiceLabels,
  imageHash,
  imageParts,
  POD_SELECTOR,
  randomSuffix,
  SERVICE_SELECTOR,
  sha256Hex,
} from '../../src/lib/pods/model/naming.js'

const DIGEST = `sha256:${'b'.repeat(64)}`

describe('function pod labels, annotations and selectors', () => {
  it('a pod\'s labels: its name (the Service selector), managed-by fnr, component, a hash of the image, the owner', () => {
    const image = 'ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.1.5'
    expect(functionPodLabels('set-labels-v015-1-abcde', image, 'runner-a')).to.deep.equal({
      'fn.kpt.dev/image': 'set-labels-v015-1-abcde',
      'app.kubernetes.io/managed-by': 'fnr',
      'app.kubernetes.io/component': 'function-pod',
      'fnr.dev/image-hash': createHash('sha256').update(image).digest('hex').slice(0, 32),
      'fnr.dev/owner': 'runner-a',
    })
    expect(functionServiceLabels('set-labels-v015-1-abcde', 'runner-a')).to.deep.equal({
      'app.kubernetes.io/managed-by': 'fnr',
      'app.kubernetes.io/component': 'function-service',
      'fnr.dev/pod': 'set-labels-v015-1-abcde',
      'fnr.dev/owner': 'runner-a',
    })
  })

  it('the selectors find exactly the pods and Services those labels mark', () => {
    expect(POD_SELECTOR).to.equal('app.kubernetes.io/managed-by=fnr,fn.kpt.dev/image')
    expect(SERVICE_SELECTOR).to.equal('app.kubernetes.io/managed-by=fnr,fnr.dev/pod')
    const matches = (selector: string, labels: Record<string, string>): boolean =>
      selector.split(',').every((term) => {
        const [key, value] = term.split('=')
        return value === undefined ? key! in labels : labels[key!] === value
      })
    const pod = functionPodLabels('p', 'img', 'o')
    const service = functionServiceLabels('p', 'o')
    expect(matches(POD_SELECTOR, pod)).to.equal(true)
    expect(matches(POD_SELECTOR, service)).to.equal(false)
    expect(matches(SERVICE_SELECTOR, service)).to.equal(true)
    expect(matches(SERVICE_SELECTOR, pod)).to.equal(false)
  })

  it('a new pod\'s annotations: template version, image, owner, last use (ISO time), TTL in whole seconds, creation id', () => {
    expect(functionPodAnnotations({templateVersion: 'inline-v3', image: 'example.com/fn:v1', owner: 'runner-a', now: Date.UTC(2026, 0, 2, 3, 4, 5), ttlMs: 1_799_600, creationId: 'c-1'})).to.deep.equal({
      'fn.kpt.dev/template-version': 'inline-v3',
      'fnr.dev/image': 'example.com/fn:v1',
      'fnr.dev/owner': 'runner-a',
      'fnr.dev/last-used': '2026-01-02T03:04:05.000Z',
      'fnr.dev/ttl-seconds': '1800',
      'fnr.dev/creation-id': 'c-1',
    })
  })

  it('hashes: sha256 in hex, the image hash its first 32 characters', () => {
    expect(sha256Hex('')).to.equal('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855')
    expect(imageHash('')).to.equal('e3b0c44298fc1c149afbf4c8996fb924')
    expect(imageHash('a')).to.not.equal(imageHash('b'))
  })

  it('image parts: the last path component, its tag and digest', () => {
    expect(imageParts('ghcr.io/o/set-labels:v0.1')).to.deep.equal({name: 'set-labels', tag: 'v0.1', digest: undefined})
    expect(imageParts('localhost:5000/fn')).to.deep.equal({name: 'fn', tag: undefined, digest: undefined})
    expect(imageParts(`r.io/fn@${DIGEST}`)).to.deep.equal({name: 'fn', tag: undefined, digest: DIGEST})
  })

  it('random suffixes are lower-case letters and digits of the length asked; the runner identity is $POD_NAME, else host name plus a suffix', () => {
    for (const n of [1, 5, 12]) expect(randomSuffix(n)).to.match(new RegExp(`^[a-z0-9]{${n}}$`))
    expect(new Set(Array.from({length: 20}, () => randomSuffix(10))).size).to.equal(20)
    expect(defaultRunnerIdentity({POD_NAME: 'function-runner-7d9-abcde'})).to.equal('function-runner-7d9-abcde')
    const a = defaultRunnerIdentity({})
    const b = defaultRunnerIdentity({})
    expect(a).to.match(/-[a-z0-9]+$/)
    expect(a).to.not.equal(b)
  })
})
