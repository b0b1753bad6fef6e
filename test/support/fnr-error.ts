/** Assertions that a call fails with an FnrError, returning the error for its kind, message and details. */
import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'

/** Awaits `p`, which must reject with an FnrError; returns it. */
export async function failure(p: Promise<unknown>): Promise<FnrError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(err, 'expected a failure').to.be.instanceOf(FnrError)
  return err as FnrError
}

/** Calls `f`, which must throw an FnrError; returns it. */
export function thrown(f: () => unknown): FnrError {
  try {
    f()
  } catch (e) {
    expect(e).to.be.instanceOf(FnrError)
    return e as FnrError
  }
  return expect.fail('expected an FnrError')
}
