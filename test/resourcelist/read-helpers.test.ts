/**
 * Helpers of the ResourceList reader (src/lib/resourcelist/read.ts): the empty list, kyaml's
 * CopyLegacyAnnotations (whichever of each legacy/internal pair is missing is filled in), an item
 * written in JSON turned to block style (empty collections kept), and the node contents kpt's
 * wrong-node-kind errors end with.
 */
import {expect} from 'chai'
import {parseDocument, type Node, type YAMLMap} from 'yaml'

import {getAnnotation} from '../../src/lib/resourcelist/meta.js'
import {copyLegacyAnnotations, emptyResourceList, nodeContents, toBlockStyle} from '../../src/lib/resourcelist/read.js'
import {PARSE_OPTIONS, stringifyNode} from '../../src/lib/resourcelist/yaml.js'

const node = (text: string): Node => parseDocument(text, PARSE_OPTIONS).contents as Node

describe('resourcelist reader helpers', () => {
  it('the empty ResourceList: wrapped, no items, no functionConfig, no results', () => {
    expect(emptyResourceList()).to.deep.equal({apiVersion: 'config.kubernetes.io/v1', kind: 'ResourceList', items: [], functionConfig: null, results: null, wrapped: true})
    expect(emptyResourceList().items).to.not.equal(emptyResourceList().items)
  })

  it('fills in whichever of each legacy/internal annotation pair is missing, and leaves pairs that have both', () => {
    const item = node("metadata:\n  name: a\n  annotations:\n    config.kubernetes.io/path: 'old.yaml'\n    internal.config.kubernetes.io/index: '2'\n    config.k8s.io/id: '1'\n    internal.config.kubernetes.io/id: '7'\n") as YAMLMap
    copyLegacyAnnotations(item)
    expect(getAnnotation(item, 'internal.config.kubernetes.io/path')).to.equal('old.yaml')
    expect(getAnnotation(item, 'config.kubernetes.io/index')).to.equal('2')
    expect(getAnnotation(item, 'config.k8s.io/id')).to.equal('1')
    expect(getAnnotation(item, 'internal.config.kubernetes.io/id')).to.equal('7')
    const bare = node('metadata:\n  name: b\n') as YAMLMap
    copyLegacyAnnotations(bare)
    expect(stringifyNode(bare)).to.equal('metadata:\n  name: b\n')
  })

  it('an item written as JSON becomes block style, recursively, empty collections kept; a block item is left as written', () => {
    const json = node('{"kind": "A", "spec": {"list": [1, {"x": []}], "empty": {}}}') as YAMLMap
    toBlockStyle(json)
    // quoting is kept as written; only the flow style goes
    expect(stringifyNode(json)).to.equal('"kind": "A"\n"spec":\n  "list":\n  - 1\n  - "x": []\n  "empty": {}\n')
    const block = node('kind: A\nspec: {inline: [1, 2]}\n') as YAMLMap
    toBlockStyle(block)
    expect(stringifyNode(block)).to.equal('kind: A\nspec: {inline: [1, 2]}\n')
  })

  it('node contents for kpt\'s wrong-node-kind errors: a scalar\'s text, a sequence\'s YAML, nothing for a map', () => {
    expect(nodeContents(node('just text'))).to.equal(': node contents:\njust text')
    expect(nodeContents(node('- a\n- b\n'))).to.equal(': node contents:\n- a\n- b')
    expect(nodeContents(node('a: 1'))).to.equal('')
  })
})
