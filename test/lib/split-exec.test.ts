/**
 * `--exec` split into a command and its arguments without a shell (src/lib/eval.ts splitExec): shell
 * quoting and escapes as a shell reads them, variables left as written, and shell operators or an
 * empty command refused as usage errors. The commands that run it are in test/commands/.
 */
import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import {splitExec} from '../../src/lib/eval.js'

describe('fnr eval --exec: words without a shell', () => {
  it('splits at blanks, honours single and double quotes and backslashes', () => {
    expect(splitExec('./fn --flag value')).to.deep.equal(['./fn', '--flag', 'value'])
    expect(splitExec("node 'my script.js' \"a b\" c\\ d")).to.deep.equal(['node', 'my script.js', 'a b', 'c d'])
    expect(splitExec('  spaced   out  ')).to.deep.equal(['spaced', 'out'])
  })

  it('leaves $VARIABLES as written: nothing is expanded', () => {
    expect(splitExec('fn $HOME ${PATH}')).to.deep.equal(['fn', '$HOME', '$PATH'])
  })

  it('refuses shell operators and an empty command (usage errors)', () => {
    for (const exec of ['fn | tee out', 'fn > out', 'fn && other', 'fn; other']) {
      expect(() => splitExec(exec), exec).to.throw(FnrError, `--exec ${JSON.stringify(exec)}: shell operators are not supported (fnr runs the command without a shell)`).with.property('kind', 'Usage')
    }
    expect(() => splitExec('')).to.throw(FnrError, '--exec is empty').with.property('kind', 'Usage')
    expect(() => splitExec('   ')).to.throw(FnrError, '--exec is empty')
  })
})
