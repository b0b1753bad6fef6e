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

/** The function's `output` reconciled by `reconcile` with each of `inputs` in turn (undefined: no counterpart), as text. */
function reconciled(reconcile: (from: Node | undefined, to: Node) => void, inputs: Array<string | undefined>, output: string): string {
  const out = node(output)
  for (const input of inputs) reconcile(input === undefined ? undefined : node(input), out)
  return stringifyNode(out)
}

describe('function output reconciled with its input', () => {
  it('restores the input\'s key order at every depth; new keys follow in the function\'s order', () => {
    expect(
      reconciled(
        syncOrder,
        ['kind: A\nmetadata:\n  name: a\n  labels: {x: "1", y: "2"}\nspec:\n  list:\n  - b: 1\n    a: 2\n'],
        'spec:\n  list:\n  - z: 0\n    a: 2\n    b: 1\n  added: true\nnew2: 2\nmetadata:\n  labels: {y: "2", x: "1"}\n  name: a\nkind: A\nnew1: 1\n',
      ),
    ).to.equal('kind: A\nmetadata:\n  name: a\n  labels: {x: "1", y: "2"}\nspec:\n  list:\n  - b: 1\n    a: 2\n    z: 0\n  added: true\nnew2: 2\nnew1: 1\n')
  })

  it('leaves the output alone without a counterpart (another type, or nothing)', () => {
    expect(reconciled(syncOrder, ['- a\n- b\n', undefined], 'b: 1\na: 2\n')).to.equal('b: 1\na: 2\n')
  })

  it('copies the input\'s comments where the output has none, on resources, keys, values and matching list items', () => {
    expect(
      reconciled(copyComments, ['# head\nkind: A # the kind\nspec:\n  # about items\n  items:\n  - one # first\n  - two # second\n'], 'kind: A\nspec:\n  items:\n  - one\n  - changed\n'),
    ).to.equal('# head\nkind: A # the kind\nspec:\n  # about items\n  items:\n  - one # first\n  - changed\n')
  })

  it('keeps the output\'s own comments', () => {
    expect(reconciled(copyComments, ['kind: A # theirs\n'], 'kind: A # mine\n')).to.equal('kind: A # mine\n')
  })
})
