/**
 * Validation from schemas (src/lib/schema/): kubectl's field errors, the CRD keywords and CEL subset, the
 * FunctionConfig schema being the shipped CRD's own, and Porch's FunctionConfigs passing it.
 */
import {readFile} from 'node:fs/promises'
import path from 'node:path'

import {expect} from 'chai'
import {parse, parseAllDocuments} from 'yaml'

import {FUNCTION_CONFIG_CRD_PATH, functionConfigSchema} from '../../src/lib/schema/function-config.js'
import {POD_CACHE_CONFIG_ENTRY} from '../../src/lib/schema/pod-cache-config.js'
import {TEST_CASE_CONFIG} from '../../src/lib/schema/test-case-config.js'
import {compileCelSubset, compileSchema, fieldPath, schemaProblems, withoutNulls, type Schema} from '../../src/lib/schema/validate.js'
import {REPO_ROOT} from '../support/serve.js'
import {requireShared} from '../support/shared.js'


describe('schemas: validation and kubectl-like field errors', () => {
  const schema: Schema = {
    type: 'object',
    properties: {
      spec: {
        type: 'object',
        required: ['image'],
        'x-kubernetes-validations': [{rule: 'has(self.a) || has(self.b.c)', message: 'At least one configuration must be specified'}],
        properties: {
          image: {type: 'string', minLength: 1},
          tags: {type: 'array', minItems: 1, items: {type: 'string'}},
          mode: {type: 'string', enum: ['eval', 'render']},
          count: {type: 'integer', minimum: 0},
          ttl: {type: 'string', format: 'duration'},
          name: {type: 'string', pattern: '^[a-z]+$'},
          quantities: {type: 'object', additionalProperties: {'x-kubernetes-int-or-string': true, anyOf: [{type: 'integer'}, {type: 'string'}]}},
          free: {type: 'object', 'x-kubernetes-preserve-unknown-fields': true},
        },
      },
    },
  }

  it('says every problem, one line each, naming the field as kubectl does', () => {
    expect(schemaProblems(schema, {spec: {image: 'x', a: 1}})).to.deep.equal([])
    expect(
      schemaProblems(schema, {
        spec: {tags: [], mode: 'wasm', count: -1, ttl: 'soon', name: 'A', quantities: {cpu: true, 'example.com/gpu': 1}, free: {anything: [1]}, unknown: {x: 1}, b: {}},
      }),
    ).to.deep.equal([
      'spec: Invalid value: "object": At least one configuration must be specified',
      'spec.image: Required value',
      'spec.tags: Invalid value: 0: must have at least 1 item',
      'spec.mode: Unsupported value: "wasm": supported values: "eval", "render"',
      'spec.count: Invalid value: -1: must be greater than or equal to 0',
      'spec.ttl: Invalid value: "soon": must be a duration like 30m',
      'spec.name: Invalid value: "A": must match the regular expression "^[a-z]+$"',
      'spec.quantities.cpu: Invalid value: true: must be of type integer or string',
    ])
    expect(schemaProblems(schema, {spec: {image: 7, tags: ['a', {b: 1}], a: 1}})).to.deep.equal([
      'spec.image: Invalid value: 7: must be of type string',
      'spec.tags[1]: Invalid value: "object": must be of type string',
    ])
    expect(schemaProblems(schema, [])).to.deep.equal(['<root>: Invalid value: "array": must be of type object'])
    // a long value is cut
    expect(schemaProblems(schema, {spec: {image: 'x', a: 1, count: 'n'.repeat(500)}})[0]!.length).to.be.lessThan(150)
  })

  it('field paths: dots for names, brackets for indexes and keys that are not names', () => {
    expect(fieldPath('/spec/podExecutor/tags/0')).to.equal('spec.podExecutor.tags[0]')
    expect(fieldPath('/spec/limits/example.com~1gpu')).to.equal('spec.limits[example.com/gpu]')
    expect(fieldPath('')).to.equal('')
  })

  it('evaluates the CEL subset the CRDs use and refuses any other rule when the schema compiles', () => {
    const rule = compileCelSubset('has(self.a) || (has(self.b.c) && !has(self.d))')
    expect(rule({a: 1})).to.equal(true)
    expect(rule({b: {c: 0}})).to.equal(true)
    expect(rule({b: {c: 0}, d: null})).to.equal(false)
    expect(rule({b: {}})).to.equal(false)
    expect(rule('text')).to.equal(false)
    for (const bad of ['self.size() > 1', 'has(self.a) ||', 'has(self.a) || has(other.b)', '(has(self.a)']) {
      expect(() => compileCelSubset(bad), bad).to.throw(/outside the CEL subset/)
    }
    expect(() => compileSchema({type: 'object', 'x-kubernetes-validations': [{rule: 'self.x == 1'}]})).to.throw(/outside the CEL subset/)
  })

  it('prunes nulls as the API server does, in a copy', () => {
    const input = {spec: {image: 'x', podExecutor: null, tags: [null, 'a'], nested: {a: null, b: 1}}}
    expect(withoutNulls(input)).to.deep.equal({spec: {image: 'x', tags: [null, 'a'], nested: {b: 1}}})
    expect(input.spec.podExecutor).to.equal(null)
  })

  it('the FunctionConfig schema is the openAPIV3Schema of the CRD the package ships', async () => {
    expect(path.relative(REPO_ROOT, FUNCTION_CONFIG_CRD_PATH)).to.equal(path.join('manifests', 'function-config', 'crds', 'functionconfigs.yaml'))
    const crd = parse(await readFile(FUNCTION_CONFIG_CRD_PATH, 'utf8')) as {spec: {versions: Array<{schema: {openAPIV3Schema: Schema}}>}}
    const loaded = await functionConfigSchema()
    expect(loaded).to.deep.equal(crd.spec.versions[0]!.schema.openAPIV3Schema)
    // loaded and compiled once
    expect(await functionConfigSchema()).to.equal(loaded)
    expect(schemaProblems(loaded, {spec: {image: 'set-namespace'}})).to.deep.equal(['spec: Invalid value: "object": At least one configuration must be specified'])
  })

  it("every FunctionConfig Porch ships passes it (../shared/compat/porch/head)", async () => {
    const docs = parseAllDocuments(await readFile(path.join(requireShared('compat/porch/head'), 'porch_23-function-configurations.yaml'), 'utf8'))
      .map((d) => d.toJS() as Record<string, unknown>)
      .filter((d) => d && d.kind === 'FunctionConfig')
    expect(docs).to.have.length(19)
    const loaded = await functionConfigSchema()
    for (const d of docs) expect(schemaProblems(loaded, withoutNulls(d)), JSON.stringify(d)).to.deep.equal([])
  })

  it('the pod cache config entry and the test case config: their own phrases for formats, quoted numbers and Go strings', () => {
    expect(schemaProblems(POD_CACHE_CONFIG_ENTRY, {name: 'a', maxWaitlistLength: '2', maxParallelPodsPerFunction: null, responseCache: '10m', extra: 1})).to.deep.equal([])
    expect(schemaProblems(POD_CACHE_CONFIG_ENTRY, {name: ' ', maxWaitlistLength: 'two', maxParallelPodsPerFunction: 1.5, responseCache: 3})).to.deep.equal([
      'name: Invalid value: " ": must not be blank',
      'maxWaitlistLength: Invalid value: "two": must be an integer',
      'maxParallelPodsPerFunction: Invalid value: 1.5: must be an integer',
      'responseCache: Invalid value: 3: must be true or false or a duration like 30m',
    ])
    // Go reads any scalar into a string field; unknown keys are kpt's to ignore
    expect(schemaProblems(TEST_CASE_CONFIG, {image: 123, stdErr: true, runCount: 2, kind: 'TestCase', imagePullPolicy: 'ifnotpresent', timeout: '1m'})).to.deep.equal([])
    expect(schemaProblems(TEST_CASE_CONFIG, {imagePullPolicy: 'sometimes', stdErrRegEx: '(?U)a', timeout: '0s'})).to.deep.equal([
      'stdErrRegEx: Invalid value: "(?U)a": must be a regular expression (the syntax Go and JavaScript share)',
      'imagePullPolicy: Invalid value: "sometimes": must be one of Always, IfNotPresent, Never (in any case)',
      'timeout: Invalid value: "0s": must be a duration above 0, like 30s or 2m',
    ])
    expect(schemaProblems(TEST_CASE_CONFIG, {imagePullPolicy: 5})).to.deep.equal(['imagePullPolicy: Invalid value: 5: must be one of Always, IfNotPresent, Never (in any case)'])
  })
})
