/**
 * A gRPC status as the client's FnrError (src/lib/grpc/client.ts fnrErrorFromStatus): INTERNAL is
 * the function's failure (with the failure trailer's details), unless grpc-js made it up for a
 * broken stream or session, which is Unavailable and may be retried; a refused stream is marked;
 * other codes map to their kinds. The statuses are built as grpc-js builds them; no call is made.
 */
import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'

import type {FunctionFailure} from '../../src/lib/function-result.js'
import {fnrErrorFromStatus, isTransportFailure} from '../../src/lib/grpc/client.js'
import {failureMetadata} from '../../src/lib/grpc/metadata.js'

function status(code: grpc.status, details: string, metadata = new grpc.Metadata()): grpc.ServiceError {
  return Object.assign(new Error(`${code} ${grpc.status[code]}: ${details}`), {code, details, metadata})
}

const FAILURE: FunctionFailure = {exitCode: 3, signal: null, results: [{message: 'replicas must be at most 3', severity: 'error'}], stderrTail: 'fatal: boom\n', truncated: false}

describe('gRPC statuses as FnrErrors', () => {
  it('INTERNAL is a function\'s failure, with the failure trailer\'s details when it has one', () => {
    const plain = fnrErrorFromStatus(status(grpc.status.INTERNAL, 'function "x" exited with code 3'))
    expect(plain.kind).to.equal('FunctionFailed')
    expect(plain.message).to.equal('function "x" exited with code 3')
    expect(plain.details).to.deep.equal({grpcCode: grpc.status.INTERNAL})
    const withTrailer = fnrErrorFromStatus(status(grpc.status.INTERNAL, 'failed', failureMetadata(FAILURE)))
    expect(withTrailer.kind).to.equal('FunctionFailed')
    expect(withTrailer.details.failure).to.deep.include({exitCode: 3, stderrTail: 'fatal: boom\n'})
  })

  it('an INTERNAL that grpc-js made up for a broken stream or session is Unavailable (the call may be retried)', () => {
    for (const details of ['Received RST_STREAM with code 2 triggered by internal client error: Session closed with error code 2', 'Connection dropped', 'Stream refused by server']) {
      expect(isTransportFailure(details), details).to.equal(true)
      expect(fnrErrorFromStatus(status(grpc.status.INTERNAL, details)).kind, details).to.equal('Unavailable')
    }
    expect(isTransportFailure('function failed: Received RST_STREAM')).to.equal(false)
    expect(isTransportFailure(undefined)).to.equal(false)
    // with a failure trailer it is the function's failure, whatever the text
    expect(fnrErrorFromStatus(status(grpc.status.INTERNAL, 'Connection dropped', failureMetadata(FAILURE))).kind).to.equal('FunctionFailed')
  })

  it('marks a refused stream; other codes map to their kinds; an empty details falls back to the message', () => {
    const refused = fnrErrorFromStatus(status(grpc.status.UNAVAILABLE, 'Stream refused by server'))
    expect(refused.kind).to.equal('Unavailable')
    expect(refused.details).to.deep.equal({grpcCode: grpc.status.UNAVAILABLE, refusedStream: true})
    expect(fnrErrorFromStatus(status(grpc.status.UNAVAILABLE, 'No connection established')).details).to.deep.equal({grpcCode: grpc.status.UNAVAILABLE})
    const kinds = [grpc.status.NOT_FOUND, grpc.status.INVALID_ARGUMENT, grpc.status.DEADLINE_EXCEEDED, grpc.status.CANCELLED, grpc.status.RESOURCE_EXHAUSTED, grpc.status.FAILED_PRECONDITION].map((c) => fnrErrorFromStatus(status(c, 'x')).kind)
    expect(kinds).to.deep.equal(['NotFound', 'InvalidArgument', 'DeadlineExceeded', 'Cancelled', 'ResourceExhausted', 'FailedPrecondition'])
    const empty = fnrErrorFromStatus(status(grpc.status.NOT_FOUND, ''))
    expect(empty.message).to.equal('5 NOT_FOUND: ')
  })
})
