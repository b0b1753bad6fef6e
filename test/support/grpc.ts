/** gRPC assertions shared by the server and wrapper tests. */
import type * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'

/** Awaits a call that must fail with the given status code; returns the error. */
export async function expectStatus(p: Promise<unknown>, code: number): Promise<grpc.ServiceError> {
  try {
    await p
  } catch (err) {
    const e = err as grpc.ServiceError
    expect(e.code, `status ${e.code}: ${e.details}`).to.equal(code)
    return e
  }
  return expect.fail(`expected status ${code}`)
}
