/**
 * src/lib/resourcelist/meta.ts: a resource's identity and annotations on YAML nodes, edited the
 * way kyaml edits them (new annotations appended single-quoted, an existing one keeps its place
 * and quoting, empty maps dropped), and kpt's IsKRM check with kpt's words.
 */
import {expect} from 'chai'
import {parseDocument, type Node} from 'yaml'

import {FnrError} from '../../src/lib/errors.js'
import {annotationsOf, clearEmptyAnnotations, deleteAnnotation, getAnnotation, krmError, metaOf, setAnnotation} from '../../src/lib/resourcelist/meta.js'
import {PARSE_OPTIONS, stringifyNode} from '../../src/lib/resourcelist/yaml.js'

const node = (text: string): Node => parseDocument(text, PARSE_OPTIONS).contents as Node

const CM = `apiVersion: v1
kind: ConfigMap
metadata:
  name: cfg
  namespace: ns
  annotations:
    b: "2"
    a: x
data:
  k: v
`

function thrown(f: () => void): FnrError {
  try {
    f()
  } catch (err) {
    expect(err).to.be.instanceOf(FnrError)
    return err as FnrError
  }
  throw new Error('expected an error')
}

describe('resourcelist/meta: reading', () => {
  it('reads apiVersion, kind, name and namespace as strings, "" when absent', () => {
    expect(metaOf(node(CM))).to.deep.equal({apiVersion: 'v1', kind: 'ConfigMap', name: 'cfg', namespace: 'ns'})
    expect(metaOf(node('kind: X\n'))).to.deep.equal({apiVersion: '', kind: 'X', name: '', namespace: ''})
    expect(metaOf(node('- a\n'))).to.deep.equal({apiVersion: '', kind: '', name: '', namespace: ''})
    // a scalar is read as its text (kyaml reads the node's value), an empty value as ""
    expect(metaOf(node('apiVersion: 1\nkind:\nmetadata: {name: 007}\n'))).to.deep.equal({apiVersion: '1', kind: '', name: '007', namespace: ''})
  })

  it('reads one annotation, and all of them in order, as strings', () => {
    const cm = node(CM)
    expect(getAnnotation(cm, 'a')).to.equal('x')
    expect(getAnnotation(cm, 'b')).to.equal('2')
    expect(getAnnotation(cm, 'c')).to.equal(undefined)
    expect([...annotationsOf(cm)]).to.deep.equal([['b', '2'], ['a', 'x']])
    expect(getAnnotation(node('metadata: {annotations: {e: }}\n'), 'e')).to.equal('')
  })

  it('has no annotations when metadata or annotations is missing or not a map', () => {
    for (const text of ['kind: X\n', 'metadata: {name: n}\n', 'metadata: {annotations: [a]}\n', 'metadata: x\n']) {
      expect(getAnnotation(node(text), 'a'), text).to.equal(undefined)
      expect(annotationsOf(node(text)).size, text).to.equal(0)
    }
  })
})

describe('resourcelist/meta: editing', () => {
  it('appends a new annotation single-quoted, after the others', () => {
    const cm = node(CM)
    setAnnotation(cm, 'config.kubernetes.io/index', '0')
    expect(stringifyNode(cm)).to.include(`  annotations:\n    b: "2"\n    a: x\n    config.kubernetes.io/index: '0'\ndata:`)
  })

  it('changes an existing annotation in place, keeping its quoting', () => {
    const cm = node(CM)
    setAnnotation(cm, 'b', '3')
    setAnnotation(cm, 'a', 'y')
    expect(stringifyNode(cm)).to.include(`  annotations:\n    b: "3"\n    a: y\ndata:`)
  })

  it('replaces an annotation whose value is not a scalar with a quoted one', () => {
    const cm = node('metadata:\n  annotations:\n    a: [1]\n')
    setAnnotation(cm, 'a', 'v')
    expect(stringifyNode(cm)).to.equal("metadata:\n  annotations:\n    a: 'v'\n")
  })

  it('creates metadata and annotations at the end of their parent when missing', () => {
    const a = node('apiVersion: v1\nkind: X\n')
    setAnnotation(a, 'k', 'v')
    expect(stringifyNode(a)).to.equal("apiVersion: v1\nkind: X\nmetadata:\n  annotations:\n    k: 'v'\n")
    const b = node('kind: X\nmetadata:\n  name: n\n')
    setAnnotation(b, 'k', 'v')
    expect(stringifyNode(b)).to.equal("kind: X\nmetadata:\n  name: n\n  annotations:\n    k: 'v'\n")
  })

  it('fills an empty metadata or annotations in, once', () => {
    for (const text of ['metadata:\nkind: X\n', 'metadata: {}\nkind: X\n', 'metadata:\n  name: n\n  annotations: {}\n', 'metadata:\n  annotations:\n']) {
      const n = node(text)
      setAnnotation(n, 'k', 'v')
      expect(getAnnotation(n, 'k'), text).to.equal('v')
      const out = stringifyNode(n)
      expect(out.match(/^metadata:/gm), out).to.have.length(1)
      expect(out.match(/^ {2}annotations:/gm), out).to.have.length(1)
    }
  })

  it('keeps a flow-style resource in flow style', () => {
    const f = node('{kind: X}\n')
    setAnnotation(f, 'k', 'v')
    expect(stringifyNode(f)).to.equal("{kind: X, metadata: {annotations: {k: 'v'}}}\n")
  })

  it('refuses a node that is not a map, or metadata/annotations that are not maps, with the kind asked for', () => {
    expect(thrown(() => setAnnotation(node('- a\n'), 'k', 'v')).message).to.equal('wrong node kind: expected MappingNode')
    expect(thrown(() => setAnnotation(node('- a\n'), 'k', 'v')).kind).to.equal('InvalidArgument')
    const e = thrown(() => setAnnotation(node('metadata: [a]\n'), 'k', 'v', 'FunctionFailed'))
    expect(e.kind).to.equal('FunctionFailed')
    expect(e.message).to.equal('wrong node kind: expected MappingNode for metadata')
    expect(thrown(() => setAnnotation(node('metadata: {annotations: text}\n'), 'k', 'v')).message).to.equal('wrong node kind: expected MappingNode for annotations')
  })

  it('deletes an annotation and says whether it was there', () => {
    const cm = node(CM)
    expect(deleteAnnotation(cm, 'b')).to.equal(true)
    expect(deleteAnnotation(cm, 'b')).to.equal(false)
    expect([...annotationsOf(cm).keys()]).to.deep.equal(['a'])
    expect(deleteAnnotation(node('kind: X\n'), 'a')).to.equal(false)
  })

  it('drops empty annotations, then empty metadata (kyaml ClearEmptyAnnotations)', () => {
    const cm = node('kind: X\nmetadata:\n  annotations:\n    a: b\n')
    deleteAnnotation(cm, 'a')
    clearEmptyAnnotations(cm)
    expect(stringifyNode(cm)).to.equal('kind: X\n')
    const named = node('kind: X\nmetadata:\n  name: n\n  annotations: {}\n')
    clearEmptyAnnotations(named)
    expect(stringifyNode(named)).to.equal('kind: X\nmetadata:\n  name: n\n')
    const nulls = node('kind: X\nmetadata:\n  annotations:\n')
    clearEmptyAnnotations(nulls)
    expect(stringifyNode(nulls)).to.equal('kind: X\n')
  })

  it('leaves non-empty annotations, and nodes without a metadata map, alone', () => {
    const keep = 'kind: X\nmetadata:\n  annotations:\n    a: b\n'
    const cm = node(keep)
    clearEmptyAnnotations(cm)
    expect(stringifyNode(cm)).to.equal(keep)
    for (const text of ['kind: X\n', 'kind: X\nmetadata: x\n', '- a\n']) {
      const n = node(text)
      clearEmptyAnnotations(n)
      expect(stringifyNode(n)).to.equal(text)
    }
  })
})

describe('resourcelist/meta: krmError (kpt IsKRM)', () => {
  it('accepts a resource with apiVersion, kind and metadata.name', () => {
    expect(krmError(node(CM), 'cm.yaml')).to.equal(undefined)
  })

  it('names the first thing missing, in kpt\'s words', () => {
    expect(krmError(node('kind: X\nmetadata: {name: n}\n'), undefined)).to.equal('resource must have `apiVersion`')
    expect(krmError(node('apiVersion: v1\nmetadata: {name: n}\n'), undefined)).to.equal('resource must have `kind`')
    expect(krmError(node('apiVersion: v1\nkind: X\n'), undefined)).to.equal('resource must have `metadata.name`')
    expect(krmError(node('apiVersion: v1\nkind: X\nmetadata:\n'), undefined)).to.equal('resource must have `metadata.name`')
    expect(krmError(node("apiVersion: v1\nkind: X\nmetadata: {name: ''}\n"), undefined)).to.equal('resource must have `metadata.name`')
  })

  it('refuses a node that is not a map, or metadata that is not a map', () => {
    expect(krmError(node('- a\n'), undefined)).to.equal('resource must have `apiVersion`, `kind`, and `name`')
    expect(krmError(node('just text\n'), undefined)).to.equal('resource must have `apiVersion`, `kind`, and `name`')
    expect(krmError(node('apiVersion: v1\nkind: X\nmetadata: [n]\n'), undefined)).to.equal('resource must have `apiVersion`, `kind`, and `name`')
  })

  it('lets Kustomizations through: by file name, by kustomize apiVersion, or kind without apiVersion', () => {
    for (const file of ['kustomization.yaml', 'a/b/kustomization.yml', 'dir/Kustomization']) expect(krmError(node('resources: [a.yaml]\n'), file), file).to.equal(undefined)
    expect(krmError(node('apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n'), 'k.yaml')).to.equal(undefined)
    expect(krmError(node('kind: Kustomization\n'), undefined)).to.equal(undefined)
    // a Kustomization kind with another apiVersion is a resource like any other
    expect(krmError(node('apiVersion: example.com/v1\nkind: Kustomization\n'), undefined)).to.equal('resource must have `metadata.name`')
    expect(krmError(node('resources: [a.yaml]\n'), 'kustomization.yaml.bak')).to.equal('resource must have `apiVersion`')
  })
})
