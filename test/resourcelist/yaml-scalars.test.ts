/**
 * YAML scalars and nodes as the ResourceList writer handles them (src/lib/resourcelist/yaml.ts):
 * which strings need quotes to read back as strings (YAML 1.2 and 1.1's booleans), null scalars,
 * kpt's single-quoted annotations, duplicate keys found anywhere, blank lines dropped, head comments
 * hoisted, and indented blocks.
 */
import {expect} from 'chai'
import {parseDocument, Scalar, type Node} from 'yaml'

import {dropBlankLines, duplicateKey, hoistHeadComment, indentLines, isNullScalar, needsQuotes, PARSE_OPTIONS, quotedScalar, scalarString, stringifyNode, stringScalar} from '../../src/lib/resourcelist/yaml.js'

const node = (text: string): Node => parseDocument(text, PARSE_OPTIONS).contents as Node

describe('resourcelist YAML: scalars and nodes', () => {
  it('quotes the strings a plain scalar would read as something else, YAML 1.1 booleans included', () => {
    for (const s of ['true', 'false', 'null', '~', '', '1', '0x1F', '1e3', '.5', 'yes', 'No', 'on', 'OFF', 'y', 'N']) expect(needsQuotes(s), JSON.stringify(s)).to.equal(true)
    for (const s of ['prod', 'a b', 'v1.2', 'yesno', 'truthy', '1.2.3']) expect(needsQuotes(s), JSON.stringify(s)).to.equal(false)
    expect(stringScalar('true').type).to.equal(Scalar.QUOTE_DOUBLE)
    expect(stringScalar('prod').type).to.equal(undefined)
    expect(quotedScalar('0').type).to.equal(Scalar.QUOTE_SINGLE)
  })

  it('null scalars: plain ~, null in its spellings, empty, or tagged !!null; never a quoted "null"', () => {
    const values = node("a: ~\nb: null\nc: NULL\nd:\ne: !!null x\nf: 'null'\ng: nil\n") as unknown as {items: Array<{value: Node}>}
    expect(values.items.map((p) => isNullScalar(p.value))).to.deep.equal([true, true, true, true, true, false, false])
  })

  it('scalarString: the text of a scalar, "" for null, undefined for anything else', () => {
    expect(scalarString(new Scalar(5))).to.equal('5')
    expect(scalarString(new Scalar(null))).to.equal('')
    expect(scalarString(node('a: 1'))).to.equal(undefined)
  })

  it('finds a duplicate key at any depth, and none in a clean document', () => {
    expect(duplicateKey(node('a: 1\nb:\n  c: 1\n  d: [{e: 1, e: 2}]\n'))).to.equal('e')
    expect(duplicateKey(node('a: 1\nb: {c: 1}\nc: 2\n'))).to.equal(undefined)
  })

  it('drops blank lines between entries, and hoists the first key\'s head comment onto the map', () => {
    const n = node('a: 1\n\nb:\n\n  - x\n\n  - y\n')
    dropBlankLines(n)
    expect(stringifyNode(n)).to.equal('a: 1\nb:\n- x\n- y\n')
    const m = node('# head\na: 1\n') as Node & {items: Array<{key: Node}>}
    expect([m.commentBefore, m.items[0]!.key.commentBefore]).to.deep.equal([undefined, ' head'])
    hoistHeadComment(m)
    expect([m.commentBefore, m.items[0]!.key.commentBefore]).to.deep.equal([' head', undefined])
  })

  it('indents every non-empty line, the first with its own prefix, ending in one newline', () => {
    expect(indentLines('a\n\nb\n', '  ')).to.equal('  a\n\n  b\n')
    expect(indentLines('a\nb', '  ', '- ')).to.equal('- a\n  b\n')
  })
})
