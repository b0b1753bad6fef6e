/**
 * src/lib/flags/suggest.ts: "did you mean …?" for a mistyped command or flag. The closest
 * candidate by edit distance, or one the word is a prefix of (3 characters or more), when it is
 * close enough: at most max(2, length/3) edits and fewer edits than the word has characters.
 */
import {expect} from 'chai'

import {closest, flagHint} from '../../src/lib/flags/suggest.js'

const COMMANDS = ['eval', 'render', 'test', 'serve', 'source', 'sink', 'pods', 'version']

describe('flags/suggest: closest', () => {
  it('finds the candidate one or two edits away (substitution, insertion, deletion, transposition)', () => {
    expect(closest('evl', COMMANDS)).to.equal('eval')
    expect(closest('evall', COMMANDS)).to.equal('eval')
    expect(closest('rendr', COMMANDS)).to.equal('render')
    expect(closest('tset', COMMANDS)).to.equal('test')
    expect(closest('srve', COMMANDS)).to.equal('serve')
  })

  it('takes an exact match', () => {
    expect(closest('sink', COMMANDS)).to.equal('sink')
  })

  it('takes a candidate the word begins, from 3 characters on', () => {
    expect(closest('vers', COMMANDS)).to.equal('version')
    expect(closest('ver', COMMANDS)).to.equal('version')
    // two characters are not enough to be a prefix, and too short to be 2 edits from anything useful
    expect(closest('ve', COMMANDS)).to.equal(undefined)
  })

  it('prefers a prefix match over a candidate at edit distance 1', () => {
    expect(closest('sou', ['sod', 'source'])).to.equal('source')
  })

  it('keeps the first of equally close candidates', () => {
    expect(closest('sin', ['sun', 'son'])).to.equal('sun')
    expect(closest('sin', ['son', 'sun'])).to.equal('son')
  })

  it('suggests nothing when no candidate is close enough', () => {
    expect(closest('zzzz', COMMANDS)).to.equal(undefined)
    expect(closest('kubectl', COMMANDS)).to.equal(undefined)
    expect(closest('x', ['y'])).to.equal(undefined)
    expect(closest('ab', ['ba'])).to.equal(undefined)
    expect(closest('anything', [])).to.equal(undefined)
  })

  it('allows more edits for longer words (length/3)', () => {
    // 3 edits: too many for a 6-character word, enough for a 9-character one
    expect(closest('abcxyz', ['abcdef'])).to.equal(undefined)
    expect(closest('abcdefxyz', ['abcdefghi'])).to.equal('abcdefghi')
  })

  it('takes any iterable', () => {
    expect(closest('evl', new Set(COMMANDS))).to.equal('eval')
  })
})

describe('flags/suggest: flagHint', () => {
  const FLAGS = ['exec', 'image', 'allow-exec', 'results-dir', 'output']

  it('suggests the flag with its dashes, ignoring the given dashes and value', () => {
    expect(flagHint('--exce', FLAGS)).to.equal('; did you mean --exec?')
    expect(flagHint('-imag', FLAGS)).to.equal('; did you mean --image?')
    expect(flagHint('--alow-exec=true', FLAGS)).to.equal('; did you mean --allow-exec?')
    expect(flagHint('--result', FLAGS)).to.equal('; did you mean --results-dir?')
  })

  it('is empty when nothing is close', () => {
    expect(flagHint('--kubeconfig', FLAGS)).to.equal('')
    expect(flagHint('--', FLAGS)).to.equal('')
  })
})
