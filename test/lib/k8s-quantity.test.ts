/**
 * src/lib/k8s/quantity.ts, the parts test/pods/quantity.test.ts leaves out: number input, the
 * error class, resource names, maps that are not maps, and checkPodResources, which turns the
 * problems into the Usage error `fnr serve` stops on (--pod-requests/--pod-limits).
 */
import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import {
  checkPodResources,
  parseQuantity,
  podResourceProblems,
  QuantityError,
  resourceNameProblem,
  resourceRequirementsProblems,
} from '../../src/lib/k8s/quantity.js'

describe('k8s/quantity: parsing edges', () => {
  it('keeps the value exact as num/den and the text it came from', () => {
    expect(parseQuantity('1.25')).to.deep.equal({text: '1.25', num: 125n, den: 100n})
    expect(parseQuantity('100m')).to.deep.equal({text: '100m', num: 100n, den: 1000n})
    expect(parseQuantity('-1.5Ki')).to.deep.equal({text: '-1.5Ki', num: -15n * 1024n, den: 10n})
    expect(parseQuantity('2e-3')).to.deep.equal({text: '2e-3', num: 2n, den: 1000n})
    // far beyond a double's precision, still exact
    expect(parseQuantity('123456789012345678901234567890').num).to.equal(123456789012345678901234567890n)
  })

  it('takes a number as its decimal text, and refuses NaN and the infinities', () => {
    expect(parseQuantity(128)).to.deep.equal({text: '128', num: 128n, den: 1n})
    expect(parseQuantity(0.5)).to.deep.equal({text: '0.5', num: 5n, den: 10n})
    for (const n of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
      expect(() => parseQuantity(n), String(n)).to.throw(QuantityError, `${n} is not a quantity`)
    }
  })

  it('throws QuantityError (not FnrError) saying what is wrong', () => {
    expect(() => parseQuantity('')).to.throw(QuantityError, 'a quantity must not be empty')
    expect(() => parseQuantity('Mi')).to.throw(QuantityError, '"Mi" is not a quantity: it must start with a number')
    expect(() => parseQuantity('1e1001')).to.throw(QuantityError, '"1e1001" is not a quantity: the exponent is out of range')
    expect(() => parseQuantity('1e-1001')).to.throw(QuantityError, 'the exponent is out of range')
    const err = (() => {
      try {
        parseQuantity('1x')
      } catch (e) {
        return e
      }
    })()
    expect(err).to.be.instanceOf(QuantityError)
    expect(err).not.to.be.instanceOf(FnrError)
  })

  it('accepts the largest allowed exponent both ways', () => {
    expect(parseQuantity('1e1000').num).to.equal(10n ** 1000n)
    expect(parseQuantity('1e-1000').den).to.equal(10n ** 1000n)
  })
})

describe('k8s/quantity: resource names', () => {
  it('accepts the standard names, hugepages of any valid size and fully qualified names', () => {
    for (const name of ['cpu', 'memory', 'ephemeral-storage', 'hugepages-2Mi', 'hugepages-1Gi', 'example.com/gpu', 'nvidia.com/gpu', 'kubernetes.io/foo', 'a.b/C_d.E-f']) {
      expect(resourceNameProblem(name), name).to.equal(undefined)
    }
  })

  it('refuses hugepages without a valid size', () => {
    expect(resourceNameProblem('hugepages-')).to.equal('"hugepages-" is not a valid hugepages resource (hugepages-<size>, like hugepages-2Mi)')
    expect(resourceNameProblem('hugepages-2MB')).to.match(/not a valid hugepages resource/)
  })

  it('refuses names that are not qualified names, or are too long', () => {
    for (const name of ['', 'Example.com/gpu', 'example.com/', '/gpu', 'example.com/-gpu', 'a b', 'example..com/gpu']) {
      expect(resourceNameProblem(name), JSON.stringify(name)).to.equal(`${JSON.stringify(name)} is not a valid resource name`)
    }
    const long = 'a'.repeat(300) + '.com/' + 'g'.repeat(20)
    expect(long.length).to.be.greaterThan(316)
    expect(resourceNameProblem(long)).to.match(/is not a valid resource name$/)
  })

  it('refuses an unqualified name that is not standard', () => {
    expect(resourceNameProblem('CPU')).to.equal('"CPU" is not a standard resource (cpu, memory, ephemeral-storage, hugepages-<size>) nor a fully qualified one (like example.com/gpu)')
  })
})

describe('k8s/quantity: requirements', () => {
  it('has no problems for undefined resources, or null maps', () => {
    expect(resourceRequirementsProblems(undefined, 'r')).to.deep.equal([])
    expect(resourceRequirementsProblems({requests: null as unknown as Record<string, unknown>}, 'r')).to.deep.equal([])
    expect(resourceRequirementsProblems({}, 'r')).to.deep.equal([])
  })

  it('says when requests or limits are not a map', () => {
    expect(resourceRequirementsProblems({requests: ['1'] as unknown as Record<string, unknown>, limits: 'x' as unknown as Record<string, unknown>}, 'r')).to.deep.equal([
      'r.requests must be a map of resource names to quantities',
      'r.limits must be a map of resource names to quantities',
    ])
  })

  it('says when a value is neither a string nor a number', () => {
    expect(resourceRequirementsProblems({limits: {cpu: true, memory: null}}, 'r')).to.deep.equal([
      'r.limits.cpu: true is not a quantity (like 100m or 128Mi)',
      'r.limits.memory: null is not a quantity (like 100m or 128Mi)',
    ])
  })

  it('reports a bad name and still checks its quantity', () => {
    expect(resourceRequirementsProblems({requests: {gpu: '-1'}}, 'r')).to.deep.equal([
      'r.requests: "gpu" is not a standard resource (cpu, memory, ephemeral-storage, hugepages-<size>) nor a fully qualified one (like example.com/gpu)',
      'r.requests.gpu: "-1" must be greater than or equal to 0',
    ])
  })

  it('compares numbers and strings exactly, and lets a request equal its limit', () => {
    expect(resourceRequirementsProblems({requests: {cpu: 0.5}, limits: {cpu: '500m'}}, 'r')).to.deep.equal([])
    expect(resourceRequirementsProblems({requests: {cpu: '501m'}, limits: {cpu: 0.5}}, 'r')).to.deep.equal([
      'r.requests.cpu: "501m" is more than the limit "0.5" (a request must be less than or equal to its limit)',
    ])
  })

  it('treats kubernetes.io/ names as overcommittable, and other qualified names as extended', () => {
    expect(resourceRequirementsProblems({requests: {'kubernetes.io/x': '1'}, limits: {'kubernetes.io/x': '2'}}, 'r')).to.deep.equal([])
    expect(resourceRequirementsProblems({requests: {'kubernetes.io/x': '3'}, limits: {'kubernetes.io/x': '2'}}, 'r')[0]).to.match(/is more than the limit/)
    expect(resourceRequirementsProblems({requests: {'example.com/gpu': '2'}, limits: {'example.com/gpu': '1'}}, 'r')).to.deep.equal([
      'r.requests.example.com/gpu: "2" must equal the limit "1" (an extended resource cannot be overcommitted)',
    ])
    expect(resourceRequirementsProblems({requests: {'example.com/gpu': '1'}, limits: {'example.com/gpu': '1000m'}}, 'r')).to.deep.equal([])
  })

  it('names containers without a name "?" and skips entries that are not objects', () => {
    expect(podResourceProblems(undefined)).to.deep.equal([])
    expect(
      podResourceProblems({containers: [null as unknown as {name: string}, {resources: {limits: {cpu: '-1'}}}]}),
    ).to.deep.equal(['spec.containers[1] (?).resources.limits.cpu: "-1" must be greater than or equal to 0'])
  })
})

describe('k8s/quantity: checkPodResources', () => {
  it('passes resources the API server accepts, and none', () => {
    expect(() => checkPodResources(undefined)).not.to.throw()
    expect(() => checkPodResources({requests: {cpu: '100m', memory: '64Mi'}, limits: {memory: '128Mi'}})).not.to.throw()
  })

  it('is a Usage error naming the flags, every problem on one line', () => {
    let err: unknown
    try {
      checkPodResources({requests: {memory: '2Gi', cpu: 'x'}, limits: {memory: '1Gi'}})
    } catch (e) {
      err = e
    }
    expect(err).to.be.instanceOf(FnrError)
    expect((err as FnrError).kind).to.equal('Usage')
    expect((err as FnrError).message).to.equal(
      '--pod-requests.cpu: "x" is not a quantity: it must start with a number (like 100m, 128Mi, 1.5 or 2e3); ' +
        '--pod-requests.memory: "2Gi" is more than the limit "1Gi" (a request must be less than or equal to its limit) (the API server would reject every pod)',
    )
  })

  it('names --pod-limits for a problem in the limits, and the map problem too', () => {
    expect(() => checkPodResources({limits: {cpu: '-2'}})).to.throw(FnrError, /^--pod-limits\.cpu: "-2" must be greater than or equal to 0 \(the API server would reject every pod\)$/)
    expect(() => checkPodResources({limits: 'x' as unknown as Record<string, unknown>})).to.throw(FnrError, /^--pod-limits must be a map/)
  })
})
