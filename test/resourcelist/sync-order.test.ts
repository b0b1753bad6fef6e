/**
 * How a function's version of a resource is reconciled with its input, as kpt does
 * (src/lib/resourcelist/function-io.ts): the input's key order restored at every depth, new keys
 * after in the function's order, lists matched by position (kyaml SyncOrder); and the input's
 * comments copied wherever the output has none (kyaml CopyComments), scalars in lists only when equal.
 */
import {expect} from 'chai'
import {parseDocument, type Node} from 'yaml'

import {copyComments, syncOrder} from '../../src/lib/resourcelist/function-io.js'
import {PARSE_OPTIONS, stringifyNode} from '../../src/lib/resourcelist/yaml.js'

const node = (text: string): Node => parseDocument(text, PARSE_OPTIONS).contents as Node

describe('function output reconciled with its input', () => {
  it('restores the input\'s key order at every depth; new keys follow in the function\'s order', () => {
    const input = node('kind: A\nmetadata:\n  name: a\n  labels: {x: "1", y: "2"}\nspec:\n  list:\n  - b: 1\n    a: 2\n')
    const output = node('spec:\n  list:\n  - z: 0\n    a: 2\n    b: 1\n  added: true\nnew2: 2\nmetadata:\n  labels: {y: "2", x: "1"}\n  name: a\nkind: A\nnew1: 1\n')
    syncOrder(input, output)
    expect(stringifyNode(output)).to.equal('kind: A\nmetadata:\n  name: a\n  labels: {x: "1", y: "2"}\nspec:\n  list:\n  - b: 1\n    a: 2\n    z: 0\n  added: true\nnew2: 2\nnew1: 1\n')
  })

  it('leaves the output alone without a counterpart (another type, or nothing)', () => {
    const output = node('b: 1\na: 2\n')
    syncOrder(node('- a\n- b\n'), output)
    syncOrder(undefined, output)
    expect(stringifyNode(output)).to.equal('b: 1\na: 2\n')
  })

  it('copies the input\'s comments where the output has none, on resources, keys, values and matching list items', () => {
    const input = node('# head\nkind: A # the kind\nspec:\n  # about items\n  items:\n  - one # first\n  - two # second\n')
    const output = node('kind: A\nspec:\n  items:\n  - one\n  - changed\n')
    copyComments(input, output)
    expect(stringifyNode(output)).to.equal('# head\nkind: A # the kind\nspec:\n  # about items\n  items:\n  - one # first\n  - changed\n')
  })

  it('keeps the output\'s own comments', () => {
    const output = node('kind: A # mine\n')
    copyComments(node('kind: A # theirs\n'), output)
    expect(stringifyNode(output)).to.equal('kind: A # mine\n')
  })
})
