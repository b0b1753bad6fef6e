import {expect} from 'chai'

import {FnrError, toFnrError} from '../../src/lib/errors.js'

// Under tsx, the test's static imports and the runtime's dynamic imports load two copies of
// errors.ts; the pod runtime is loaded dynamically by serve, and its errors must keep their kind.
describe('FnrError across module copies', () => {
  it('instanceof and toFnrError recognise an FnrError from another copy of the module', async () => {
    const other = (await import(`../../src/lib/errors.js?copy=${Date.now()}`)) as typeof import('../../src/lib/errors.js')
    const foreign = new other.FnrError('FunctionFailed', 'line one\nline two', {details: {failure: {exitCode: 3}}})
    expect(foreign).to.be.instanceOf(FnrError)
    expect(toFnrError(foreign)).to.equal(foreign)
    expect(toFnrError(foreign).message).to.equal('line one\nline two')
    expect(new Error('x')).not.to.be.instanceOf(FnrError)
    expect((null as unknown) instanceof FnrError).to.equal(false)
  })
})
