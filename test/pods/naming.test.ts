import {expect} from 'chai'

import {imageParts, isDns1035Label, isValidLabelValue, labelValueFor, podNameBase, podNameFor} from '../../src/lib/pods/model/naming.js'

const ODD_IMAGES = [
  'gcr.io/kpt-fn/apply-replacements:latest',
  'gcr.io/kpt-fn/set-namespace',
  'gcr.io/kpt-fn/set-labels:v0.4.1',
  'gcr.io/kpt-fn/my_function:latest',
  // digests: upstream puts "sha256:…" in the name, which is not a valid name
  'ghcr.io/kptdev/krm-functions-catalog/set-labels@sha256:584115f2a1b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9',
  'ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.2.2@sha256:584115f2a1b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9',
  'Registry.Example.COM/Team/Set_Labels:V1.0_RC1',
  'example.com/fn/9lives:1.0',
  'localhost:5000/fn:tag',
  'example.com/' + 'very-long-function-name-'.repeat(6) + ':' + 'v1.2.3-and-a-very-long-tag-'.repeat(3),
  'invalid@oci@ref',
  '___',
  '',
]

describe('pod names and labels', () => {
  it('keeps upstream\'s readable shape for ordinary images', () => {
    expect(podNameBase('gcr.io/kpt-fn/apply-replacements:latest')).to.equal('apply-replacements-latest')
    expect(podNameBase('gcr.io/kpt-fn/set-namespace')).to.equal('set-namespace-latest')
    expect(podNameBase('gcr.io/kpt-fn/set-labels:v0.4.1')).to.equal('set-labels-v041')
    expect(podNameBase('gcr.io/kpt-fn/my_function:latest')).to.equal('my-function-latest')
  })

  it('makes a valid DNS-1035 pod and Service name for any image reference (upstream names break on digests, uppercase and underscores)', () => {
    for (const image of ODD_IMAGES) {
      const name = podNameFor(image)
      expect(isDns1035Label(name), `${JSON.stringify(image)} → ${name}`).to.equal(true)
      expect(isValidLabelValue(name), `label value ${name}`).to.equal(true)
    }
  })

  it('uses the digest for digest references, and never a colon', () => {
    const name = podNameFor('ghcr.io/x/set-labels@sha256:584115f2a1b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9', 'abcde')
    expect(name).to.match(/^set-labels-584115f2a1b3-[0-9a-f]{8}-abcde$/)
    expect(imageParts('a/b:c@sha256:1').digest).to.equal('sha256:1')
  })

  it('gives different images different names even when they read the same', () => {
    const a = podNameFor('example.com/a/fn:v1.0', 'aaaaa')
    const b = podNameFor('example.com/b/fn:v10', 'aaaaa')
    expect(podNameBase('example.com/a/fn:v1.0')).to.equal(podNameBase('example.com/b/fn:v10'))
    expect(a).not.to.equal(b)
  })

  it('is unique per pod (random suffix)', () => {
    // Five random characters of 36: 60 million names per image. Two of 500 draws are the same once
    // in ~500 runs (the birthday bound), which made this test fail once in CI when it asked for 500
    // distinct names; so it counts them. A taken name is retried by the pod manager (409, nameTaken).
    const names = Array.from({length: 500}, () => podNameFor('example.com/fn/cat:v1'))
    const base = podNameFor('example.com/fn/cat:v1', '')
    for (const name of names) expect(name.startsWith(base) && /^[a-z0-9]{5}$/.test(name.slice(base.length)), name).to.equal(true)
    expect(new Set(names).size).to.be.at.least(495)
    // every character of the alphabet can come up: 2,500 draws miss one of 36 with a chance below 1e-28
    expect(new Set(names.flatMap((n) => [...n.slice(base.length)])).size).to.equal(36)
  })

  it('turns any runner identity into a label value', () => {
    expect(labelValueFor('porch-fn-runner-7d9f8b6c5-abcde')).to.equal('porch-fn-runner-7d9f8b6c5-abcde')
    for (const id of ['host.example.com', 'x'.repeat(100), '-weird id!', '___', 'ü']) {
      expect(isValidLabelValue(labelValueFor(id)), id).to.equal(true)
    }
    expect(labelValueFor('x'.repeat(100))).not.to.equal(labelValueFor('x'.repeat(101)))
  })
})
