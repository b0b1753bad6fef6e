// client-node's dependencies' deprecation warnings are dropped, every other warning still prints
// (src/lib/k8s/dependency-warnings.ts).
import {expect} from 'chai'

import {quietDependencyDeprecations} from '../../src/lib/k8s/dependency-warnings.js'

describe('dependency deprecation warnings', () => {
  it('drops DEP0040 and DEP0169 in both call forms and lets others through', async () => {
    quietDependencyDeprecations()
    quietDependencyDeprecations()
    const seen: string[] = []
    const listener = (w: Error & {code?: string}): void => {
      seen.push(w.code ?? w.message)
    }
    process.on('warning', listener)
    try {
      process.emitWarning('punycode', 'DeprecationWarning', 'DEP0040')
      process.emitWarning('url.parse', {type: 'DeprecationWarning', code: 'DEP0169'})
      process.emitWarning('something else', 'DeprecationWarning', 'DEP0005')
      process.emitWarning('plain')
      await new Promise((r) => setImmediate(r))
    } finally {
      process.off('warning', listener)
    }
    expect(seen).to.deep.equal(['DEP0005', 'plain'])
  })
})
