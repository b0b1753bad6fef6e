/**
 * Reading a case's expected diff (src/lib/fntest/compare.ts): the renames of git patch sections
 * that only rename, with git's quoted paths (C escapes, octal UTF-8 bytes), and the unified diff
 * fnr shows between two texts. Comparing whole packages is in ./compare.test.ts.
 */
import {expect} from 'chai'

import {diffText, gitPureRenames} from '../../src/lib/fntest/compare.js'

describe('fnr test: renames in a git patch, and text diffs', () => {
  it('lists the sections that only rename; a section that also edits the file is left to the patch', () => {
    const patch = [
      'diff --git a/old.yaml b/new.yaml',
      'similarity index 100%',
      'rename from old.yaml',
      'rename to new.yaml',
      'diff --git a/a.yaml b/b.yaml',
      'similarity index 80%',
      'rename from a.yaml',
      'rename to b.yaml',
      '--- a/a.yaml',
      '+++ b/b.yaml',
      '@@ -1 +1 @@',
      '-x: 1',
      '+x: 2',
      'diff --git a/sub/c.yaml b/moved/c.yaml',
      'rename from sub/c.yaml',
      'rename to moved/c.yaml',
      '',
    ].join('\n')
    expect(gitPureRenames(patch)).to.deep.equal([
      {from: 'old.yaml', to: 'new.yaml'},
      {from: 'sub/c.yaml', to: 'moved/c.yaml'},
    ])
    expect(gitPureRenames('')).to.deep.equal([])
  })

  it('unquotes the paths git quotes: escapes and octal bytes of UTF-8', () => {
    const patch = 'diff --git "a/with\\ttab.yaml" "b/caf\\303\\251.yaml"\nrename from "with\\ttab.yaml"\nrename to "caf\\303\\251 \\"q\\".yaml"\n'
    expect(gitPureRenames(patch)).to.deep.equal([{from: 'with\ttab.yaml', to: 'café "q".yaml'}])
  })

  it('diffText: nothing for equal texts, else a unified diff with both names and 3 lines of context', () => {
    expect(diffText('expected/a.yaml', 'actual/a.yaml', 'same\n', 'same\n')).to.equal('')
    const d = diffText('expected/a.yaml', 'actual/a.yaml', 'a\nb\nc\nd\ne\nf\ng\n', 'a\nb\nc\nd\nE\nf\ng\n')
    expect(d).to.contain('--- expected/a.yaml\n+++ actual/a.yaml\n')
    expect(d).to.contain('@@ -2,6 +2,6 @@\n b\n c\n d\n-e\n+E\n f\n g\n')
    expect(d).to.not.contain('\n a\n')
  })
})
