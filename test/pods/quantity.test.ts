/**
 * Kubernetes quantities parsed as the API server parses them (src/lib/k8s/quantity.ts), and the
 * resource checks it makes on a container (docs/porch-swap.md, "Pods the API server would reject are refused first"): a request above its limit, a malformed
 * or negative quantity, a resource name it does not know.
 */
import {expect} from 'chai'

import {compareQuantities, isQuantity, parseQuantity, podResourceProblems, resourceRequirementsProblems} from '../../src/lib/k8s/quantity.js'

const value = (q: string): number => {
  const p = parseQuantity(q)
  return Number(p.num) / Number(p.den)
}
const eq = (a: string, b: string): number => compareQuantities(parseQuantity(a), parseQuantity(b))

describe('Kubernetes quantities', () => {
  it('parses every suffix: binary Ki..Ei, decimal n u m k M G T P E, exponents, signs and decimals', () => {
    const cases: Array<[string, number]> = [
      ['0', 0], ['1', 1], ['100m', 0.1], ['1.5', 1.5], ['.5', 0.5], ['5.', 5], ['+3', 3], ['-2', -2],
      ['1Ki', 1024], ['1Mi', 1024 ** 2], ['1Gi', 1024 ** 3], ['1Ti', 1024 ** 4], ['1Pi', 1024 ** 5], ['1Ei', 1024 ** 6],
      ['1n', 1e-9], ['1u', 1e-6], ['1m', 1e-3], ['1k', 1e3], ['1M', 1e6], ['1G', 1e9], ['1T', 1e12], ['1P', 1e15], ['1E', 1e18],
      ['1e3', 1e3], ['1E3', 1e3], ['2e-3', 2e-3], ['1.5e+2', 150], ['0.5Gi', 512 * 1024 ** 2],
    ]
    for (const [text, n] of cases) expect(value(text), text).to.be.closeTo(n, Math.abs(n) * 1e-12)
    expect(isQuantity(128)).to.equal(true)
  })

  it('compares exactly, across suffixes', () => {
    expect(eq('1Gi', '1073741824')).to.equal(0)
    expect(eq('0.5', '500m')).to.equal(0)
    expect(eq('1k', '1e3')).to.equal(0)
    expect(eq('1G', '1Gi')).to.equal(-1)
    expect(eq('1001m', '1')).to.equal(1)
    expect(eq('1E', '1Ei')).to.equal(-1)
  })

  it('refuses what the API server refuses, saying why', () => {
    for (const bad of ['', ' 1', '1 ', 'abc', '1.5.5', '1KB', '1kb', '1ki', '1e', '1e1.5', '1mi', '--1', '1Gi1', 'Mi', '.', '1e99999']) {
      expect(() => parseQuantity(bad), JSON.stringify(bad)).to.throw(/quantity|exponent/)
    }
    expect(() => parseQuantity('12GB')).to.throw(/unknown suffix "GB"/)
  })

  it('finds a request above its limit, malformed and negative quantities, unknown names, overcommitted extended and hugepages resources', () => {
    expect(resourceRequirementsProblems({requests: {cpu: '100m', memory: '128Mi'}, limits: {memory: '1Gi'}}, 'r')).to.deep.equal([])
    expect(resourceRequirementsProblems({requests: {memory: '1Gi'}, limits: {memory: '1073741824'}}, 'r')).to.deep.equal([])
    expect(resourceRequirementsProblems({requests: {memory: '2Gi'}, limits: {memory: '1Gi'}}, 'r')).to.deep.equal([
      'r.requests.memory: "2Gi" is more than the limit "1Gi" (a request must be less than or equal to its limit)',
    ])
    expect(resourceRequirementsProblems({requests: {cpu: '1.5Gb'}}, 'r')[0]).to.match(/^r\.requests\.cpu: "1\.5Gb" is not a quantity: unknown suffix "Gb"/)
    expect(resourceRequirementsProblems({limits: {cpu: '-1'}}, 'r')).to.deep.equal(['r.limits.cpu: "-1" must be greater than or equal to 0'])
    expect(resourceRequirementsProblems({limits: {gpu: '1'}}, 'r')[0]).to.match(/"gpu" is not a standard resource .* nor a fully qualified one/)
    expect(resourceRequirementsProblems({requests: {'example.com/gpu': '1'}, limits: {'example.com/gpu': '2'}}, 'r')[0]).to.match(/must equal the limit "2"/)
    expect(resourceRequirementsProblems({requests: {'hugepages-2Mi': '2Mi', memory: '64Mi'}, limits: {'hugepages-2Mi': '2Mi', 'ephemeral-storage': '1Gi'}}, 'r')).to.deep.equal([])
    // as kube-apiserver: hugepages and extended resources are never overcommitted (a limit, equal to the request),
    // hugepages come with cpu or memory, and a name containing kubernetes.io/ is native (overcommit allowed)
    expect(resourceRequirementsProblems({requests: {'hugepages-2Mi': '2Mi', cpu: '1'}, limits: {'hugepages-2Mi': '4Mi'}}, 'r')).to.deep.equal([
      'r.requests.hugepages-2Mi: "2Mi" must equal the limit "4Mi" (hugepages cannot be overcommitted)',
    ])
    // a container's whole resources only (an override may get its limit, or its memory, from the template)
    expect(resourceRequirementsProblems({requests: {'example.com/gpu': '1'}}, 'r', {complete: true})).to.deep.equal(['r.limits.example.com/gpu: a limit is required (an extended resource cannot be overcommitted)'])
    expect(resourceRequirementsProblems({limits: {'hugepages-1Gi': '1Gi'}}, 'r', {complete: true})).to.deep.equal(['r: hugepages need a cpu or memory request or limit as well'])
    expect(resourceRequirementsProblems({requests: {'example.com/gpu': '1'}, limits: {'hugepages-1Gi': '1Gi'}}, 'r')).to.deep.equal([])
    expect(podResourceProblems({containers: [{name: 'function', resources: {requests: {'example.com/gpu': '1'}}}]})).to.deep.equal([
      'spec.containers[0] (function).resources.limits.example.com/gpu: a limit is required (an extended resource cannot be overcommitted)',
    ])
    expect(resourceRequirementsProblems({requests: {'foo.kubernetes.io/x': '1'}, limits: {'foo.kubernetes.io/x': '2'}}, 'r')).to.deep.equal([])
    expect(
      podResourceProblems({initContainers: [{name: 'init', resources: {requests: {memory: '1x'}}}], containers: [{name: 'function', resources: {requests: {cpu: '2'}, limits: {cpu: '1'}}}]}),
    ).to.deep.equal([
      'spec.initContainers[0] (init).resources.requests.memory: "1x" is not a quantity: unknown suffix "x" (use Ki, Mi, Gi, Ti, Pi, Ei, n, u, m, k, M, G, T, P, E or an exponent like e3)',
      'spec.containers[0] (function).resources.requests.cpu: "2" is more than the limit "1" (a request must be less than or equal to its limit)',
    ])
  })
})
