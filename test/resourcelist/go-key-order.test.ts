/**
 * How go-yaml orders a Go map's string keys (src/lib/resourcelist/goyaml.ts goKeyOrder), which kpt's
 * results.yaml follows for `tags`: rune by rune, letters as runes, a letter after a non-letter
 * unless digits came just before, runs of digits as numbers, and a prefix first.
 */
import {expect} from 'chai'

import {goKeyOrder} from '../../src/lib/resourcelist/goyaml.js'

const sorted = (keys: string[]): string[] => [...keys].sort(goKeyOrder)

describe('go-yaml key order', () => {
  it('kpt\'s own example: a_, a9, a10, aB', () => {
    expect(sorted(['aB', 'a10', 'a_', 'a9'])).to.deep.equal(['a_', 'a9', 'a10', 'aB'])
  })

  it('letters compare as runes (upper case first), a prefix comes first', () => {
    expect(sorted(['b', 'a', 'B', 'ab', 'A'])).to.deep.equal(['A', 'B', 'a', 'ab', 'b'])
    expect(goKeyOrder('abc', 'ab')).to.be.greaterThan(0)
    expect(goKeyOrder('same', 'same')).to.equal(0)
  })

  it('runs of digits compare as numbers', () => {
    expect(sorted(['x100', 'x20', 'x3'])).to.deep.equal(['x3', 'x20', 'x100'])
    expect(sorted(['10', '9', '100'])).to.deep.equal(['9', '10', '100'])
  })

  it('a letter goes after a non-letter, unless digits came just before it', () => {
    expect(goKeyOrder('a-', 'aa')).to.be.lessThan(0)
    expect(goKeyOrder('aa', 'a-')).to.be.greaterThan(0)
    expect(goKeyOrder('1a', '1-')).to.be.lessThan(0)
  })
})
