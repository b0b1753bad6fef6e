import {expect} from 'chai'

import {FnrError, type ErrorKind} from '../../../src/lib/errors.js'

/** Awaits a promise that must reject with an FnrError of `kind`; returns the error. */
export async function expectFnrError(promise: Promise<unknown>, kind: ErrorKind, message?: RegExp | string): Promise<FnrError> {
  const outcome = await promise.then(
    (value: unknown) => ({ok: true as const, value}),
    (err: unknown) => ({ok: false as const, err}),
  )
  if (outcome.ok) expect.fail(`expected an FnrError(${kind}), got a result: ${JSON.stringify(outcome.value).slice(0, 300)}`)
  const err = outcome.err
  if (!(err instanceof FnrError)) expect.fail(`expected an FnrError(${kind}), got ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`)
  expect(err.kind, `kind of "${err.message}"`).to.equal(kind)
  if (typeof message === 'string') expect(err.message).to.equal(message)
  else if (message !== undefined) expect(err.message).to.match(message)
  expect(err.message, 'one line').not.to.include('\n')
  return err
}
