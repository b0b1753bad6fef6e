/**
 * errorJson (src/cli/render-error.ts): what a command run with --json prints for a failure.
 */
import {expect} from 'chai'

import {errorJson} from '../../src/cli/render-error.js'
import {FnrError} from '../../src/lib/errors.js'

describe('errorJson', () => {
  it('is {"error": {kind, message, exitCode}}, the exit code of the kind', () => {
    expect(errorJson(new FnrError('NotFound', 'image "x" not found'))).to.deep.equal({error: {kind: 'NotFound', message: 'image "x" not found', exitCode: 4}})
    expect(errorJson(new FnrError('Usage', 'bad flag')).error.exitCode).to.equal(2)
  })

  it('takes the exit code the process ends with when given (an interrupt\'s 130/143)', () => {
    expect(errorJson(new FnrError('Cancelled', 'interrupted by SIGINT'), 130).error).to.deep.equal({kind: 'Cancelled', message: 'interrupted by SIGINT', exitCode: 130})
  })

  it('keeps the fields of the report an error carries, with the error beside them', () => {
    const report = {namespace: 'ns', items: [{name: 'p', error: 'forbidden'}], failed: 1}
    expect(errorJson(new FnrError('Internal', '1 of 1 deletions failed', {details: {report}}))).to.deep.equal({...report, error: {kind: 'Internal', message: '1 of 1 deletions failed', exitCode: 1}})
  })

  it('turns a foreign error into an Internal one (first line of its message), and never prints details such as buffers', () => {
    expect(errorJson(new Error('boom\nstack-ish'))).to.deep.equal({error: {kind: 'Internal', message: 'boom', exitCode: 1}})
    const withBuffers = new FnrError('FunctionFailed', 'exited 1', {details: {stdout: Buffer.from('x'), stderr: Buffer.from('y')}})
    expect(JSON.stringify(errorJson(withBuffers))).to.equal('{"error":{"kind":"FunctionFailed","message":"exited 1","exitCode":1}}')
  })
})
