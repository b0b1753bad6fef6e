/**
 * src/lib/config/canonical-json.ts: sorted-key JSON, so equal objects hash the same whatever their
 * key order (the pod template version and FunctionConfig override versions are hashes of it).
 */
import {expect} from 'chai'

import {canonicalJson} from '../../src/lib/config/canonical-json.js'

describe('config/canonical-json', () => {
  it('sorts keys at every depth, so key order does not change the text', () => {
    const a = {b: 1, a: {d: [1, {z: 1, y: 2}], c: 'x'}}
    const b = {a: {c: 'x', d: [1, {y: 2, z: 1}]}, b: 1}
    expect(canonicalJson(a)).to.equal('{"a":{"c":"x","d":[1,{"y":2,"z":1}]},"b":1}')
    expect(canonicalJson(b)).to.equal(canonicalJson(a))
  })

  it('keeps array order (it is meaning, not layout)', () => {
    expect(canonicalJson([2, 1])).to.equal('[2,1]')
    expect(canonicalJson([2, 1])).not.to.equal(canonicalJson([1, 2]))
  })

  it('drops undefined members as JSON.stringify does, and keeps null', () => {
    expect(canonicalJson({a: undefined, b: null})).to.equal('{"b":null}')
    expect(canonicalJson({a: undefined})).to.equal(canonicalJson({}))
  })

  it('renders scalars as JSON.stringify does', () => {
    expect(canonicalJson('a"b\n')).to.equal('"a\\"b\\n"')
    expect(canonicalJson(1.5)).to.equal('1.5')
    expect(canonicalJson(true)).to.equal('true')
    expect(canonicalJson(null)).to.equal('null')
    expect(canonicalJson(0)).to.equal('0')
    expect(canonicalJson('')).to.equal('""')
  })

  it('sorts keys by UTF-16 code unit (upper case before lower case), with keys escaped', () => {
    expect(canonicalJson({b: 1, B: 2, a: 3, '"q': 4})).to.equal('{"\\"q":4,"B":2,"a":3,"b":1}')
  })

  it('tells apart values that differ only deep down', () => {
    expect(canonicalJson({x: {y: [1, {z: '1'}]}})).not.to.equal(canonicalJson({x: {y: [1, {z: 1}]}}))
  })

  it('renders empty collections', () => {
    expect(canonicalJson({})).to.equal('{}')
    expect(canonicalJson([])).to.equal('[]')
    expect(canonicalJson({a: [], b: {}})).to.equal('{"a":[],"b":{}}')
  })
})
