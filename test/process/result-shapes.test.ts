/**
 * One function result as fnr reads it from a parsed ResourceList (src/lib/process/results.ts):
 * the shapes kpt accepts (resourceRef.metadata, field.suggestedValue, the legacy {items: [...]}
 * list), non-string messages and tags as text, the error results picked out, and the top-level
 * `results:` section cut from a document's text. Bounded reading of hostile output is in
 * ./results-bounds.test.ts.
 */
import {expect} from 'chai'

import {errorResults, normaliseResult, resultsOf, resultsSection, type FunctionResult} from '../../src/lib/process/results.js'

describe('function results: shapes', () => {
  it('keeps message, severity, resourceRef, field, file and tags as written', () => {
    // A new object each time, so the result is compared with the input as written, not with an input normaliseResult may have changed.
    const asWritten = () => ({
      message: 'replicas must be at most 3',
      severity: 'error',
      resourceRef: {apiVersion: 'apps/v1', kind: 'Deployment', name: 'web', namespace: 'prod'},
      field: {path: 'spec.replicas', currentValue: 5, proposedValue: 3},
      file: {path: 'deploy.yaml', index: 1},
      tags: {team: 'a'},
    })
    const r = normaliseResult(asWritten())
    expect(r).to.deep.equal(asWritten())
  })

  it('accepts kpt\'s legacy shapes: resourceRef.metadata.name/namespace and field.suggestedValue', () => {
    const r = normaliseResult({message: 'm', resourceRef: {apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'cm', namespace: 'ns'}}, field: {path: 'data.k', suggestedValue: 'v'}})
    expect(r!.resourceRef).to.deep.equal({apiVersion: 'v1', kind: 'ConfigMap', name: 'cm', namespace: 'ns'})
    expect(r!.field).to.deep.equal({path: 'data.k', currentValue: undefined, proposedValue: 'v'})
  })

  it('makes text of a message or tag that is not a string; drops an empty severity, a non-numeric file index, a non-object result', () => {
    expect(normaliseResult({message: 42})!.message).to.equal('42')
    expect(normaliseResult({message: {a: [1]}})!.message).to.equal('{"a":[1]}')
    expect(normaliseResult({})!.message).to.equal('')
    expect(normaliseResult({message: 'm', severity: ''})).to.deep.equal({message: 'm'})
    expect(normaliseResult({message: 'm', file: {path: 'a.yaml', index: '2'}})!.file).to.deep.equal({path: 'a.yaml', index: undefined})
    expect(normaliseResult({message: 'm', tags: {n: 1, b: true, o: {x: 1}}})!.tags).to.deep.equal({n: '1', b: 'true', o: '{"x":1}'})
    for (const bad of [null, 'text', 7, [1, 2]]) expect(normaliseResult(bad), JSON.stringify(bad)).to.equal(undefined)
  })

  it('reads the list form and the legacy {items: [...]} form; anything else has no results', () => {
    expect(resultsOf({results: [{message: 'a'}, 'not a result', {message: 'b', severity: 'warning'}]})).to.deep.equal([{message: 'a'}, {message: 'b', severity: 'warning'}])
    expect(resultsOf({results: {items: [{message: 'legacy'}]}})).to.deep.equal([{message: 'legacy'}])
    expect(resultsOf({results: 'none'})).to.deep.equal([])
    expect(resultsOf({})).to.deep.equal([])
    expect(resultsOf(null)).to.deep.equal([])
  })

  it('picks the error results, in order', () => {
    const all: FunctionResult[] = [{message: 'a', severity: 'error'}, {message: 'b'}, {message: 'c', severity: 'warning'}, {message: 'd', severity: 'error'}, {message: 'e', severity: 'Error'}]
    expect(errorResults(all).map((r) => r.message)).to.deep.equal(['a', 'd'])
  })

  it('cuts the top-level results: section from a document, up to the next top-level key or document', () => {
    const doc = 'apiVersion: v1\nkind: ResourceList\nitems: []\nresults:\n- message: a\n  # a comment\n\n- message: b\nfunctionConfig: {}\n'
    expect(resultsSection(doc)).to.equal('results:\n- message: a\n  # a comment\n\n- message: b\n')
    expect(resultsSection('results:\n- message: a\n---\nkind: Other\n')).to.equal('results:\n- message: a\n')
    expect(resultsSection('results: []')).to.equal('results: []')
    expect(resultsSection('items:\n  results:\n  - nested\n')).to.equal(undefined)
  })
})
