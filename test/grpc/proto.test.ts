/**
 * The evaluator protocol as fnr loads it (src/lib/grpc/proto.ts, proto/evaluator.proto): one
 * unary EvaluateFunction method at Porch's path, messages that round-trip through their wire form
 * with camelCase fields, its client made once. The bytes are compared with protobufjs's in
 * ./wire.test.ts.
 */
import {expect} from 'chai'

import {EVALUATE_METHOD_PATH, EVALUATOR_SERVICE, evaluatorClientConstructor, evaluatorServiceDefinition} from '../../src/lib/grpc/proto.js'

describe('evaluator protocol', () => {
  it('one unary method, EvaluateFunction, at Porch\'s path', () => {
    const service = evaluatorServiceDefinition()
    expect(EVALUATOR_SERVICE).to.equal('evaluator.FunctionEvaluator')
    expect(Object.keys(service)).to.deep.equal(['EvaluateFunction'])
    const method = service.EvaluateFunction!
    expect(method.path).to.equal(EVALUATE_METHOD_PATH)
    expect(method.path).to.equal('/evaluator.FunctionEvaluator/EvaluateFunction')
    expect([method.requestStream, method.responseStream]).to.deep.equal([false, false])
    expect(evaluatorClientConstructor().service.EvaluateFunction!.path).to.equal(EVALUATE_METHOD_PATH)
  })

  it('request and response round-trip through the wire form, camelCase in JS, defaults filled in', () => {
    const method = evaluatorServiceDefinition().EvaluateFunction!
    const request = {resourceList: Buffer.from('kind: ResourceList\n'), image: 'example.com/fn:v1'}
    const wire = method.requestSerialize(request)
    expect(Buffer.isBuffer(wire)).to.equal(true)
    const back = method.requestDeserialize(wire) as {resourceList: Buffer; image: string}
    expect(back.image).to.equal('example.com/fn:v1')
    expect(Buffer.from(back.resourceList).toString()).to.equal('kind: ResourceList\n')
    const response = method.responseDeserialize(method.responseSerialize({resourceList: Buffer.from('out'), log: Buffer.alloc(0)})) as {resourceList: Buffer; log: Buffer}
    expect(Buffer.from(response.resourceList).toString()).to.equal('out')
    expect(Buffer.from(response.log).length).to.equal(0)
    const empty = method.requestDeserialize(Buffer.alloc(0)) as {resourceList: Buffer; image: string}
    expect(empty.image).to.equal('')
    expect(Buffer.from(empty.resourceList).length).to.equal(0)
  })

  it('the definition and the client constructor are made once', () => {
    expect(evaluatorServiceDefinition()).to.equal(evaluatorServiceDefinition())
    expect(evaluatorClientConstructor()).to.equal(evaluatorClientConstructor())
  })
})
