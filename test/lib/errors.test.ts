import {expect} from 'chai'

import {FnrError, GrpcCode, firstLine, kindForGrpcCode, toFnrError} from '../../src/lib/errors.js'

describe('errors', () => {
  it('maps kinds to gRPC codes and exit codes', () => {
    const e = new FnrError('NotFound', 'function "x" not found')
    expect(e.grpcCode).to.equal(GrpcCode.NOT_FOUND)
    expect(e.exitCode).to.equal(4)
    expect(new FnrError('FunctionFailed', 'x').grpcCode).to.equal(GrpcCode.INTERNAL)
    expect(new FnrError('DeadlineExceeded', 'x').exitCode).to.equal(6)
  })

  it('wraps foreign errors and keeps the cause', () => {
    const cause = new Error('boom\nsecond line')
    const e = toFnrError(cause)
    expect(e.kind).to.equal('Internal')
    expect(e.message).to.equal('boom')
    expect(e.cause).to.equal(cause)
    expect(toFnrError(e)).to.equal(e)
  })

  it('maps gRPC codes back to kinds', () => {
    expect(kindForGrpcCode(GrpcCode.UNAVAILABLE)).to.equal('Unavailable')
    expect(kindForGrpcCode(GrpcCode.UNKNOWN)).to.equal('Internal')
  })

  it('cuts messages to one line', () => {
    expect(firstLine('a\nb')).to.equal('a')
    expect(firstLine('x'.repeat(600))).to.have.length(500)
  })
})
