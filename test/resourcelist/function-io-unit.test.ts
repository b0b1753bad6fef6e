/** Reading a function's output back into a package (src/lib/resourcelist/function-io.ts), in process; the round trips through functions and kpt are in ./function-io.test.ts. */

import {expect} from 'chai'
import {parse} from 'yaml'

import {FnrError} from '../../src/lib/errors.js'
import {
  buildFunctionInput,
  getAnnotation,
  parseResourceList,
  readFunctionOutput,
  unwrapToYaml,
} from '../../src/lib/resourcelist/index.js'

describe('resourcelist function round trip', () => {
  describe('unit', () => {
    const rl = (items: string) => `apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n${items}`

    it('rejects non-KRM input with kpt\'s message', () => {
      const list = parseResourceList(rl('- apiVersion: v1\n  kind: A\n  metadata:\n    name: a\n- foo: bar\n  metadata:\n    annotations:\n      internal.config.kubernetes.io/path: values.yaml\n'))
      const e = (() => {
        try {
          buildFunctionInput(list.items)
        } catch (x) {
          return x as FnrError
        }
      })()!
      expect(e.kind).to.equal('InvalidArgument')
      expect(e.message).to.equal('input resource list must contain only KRM resources: values.yaml: resource must have `apiVersion`')
    })

    it('rejects input whose legacy and internal paths disagree', () => {
      const list = parseResourceList(
        rl('- apiVersion: v1\n  kind: A\n  metadata:\n    name: a\n    annotations:\n      internal.config.kubernetes.io/path: a.yaml\n      config.kubernetes.io/path: b.yaml\n'),
      )
      expect(() => buildFunctionInput(list.items)).to.throw(FnrError, 'resource input to function has mismatched legacy and internal path annotations')
    })

    it('restores comments a function dropped, without duplicating kept ones', () => {
      const list = parseResourceList(
        rl('- # head\n  apiVersion: v1 # av\n  kind: A\n  metadata:\n    name: a\n  spec:\n    # before list\n    l:\n    - a # on a\n    - b\n'),
      )
      const input = buildFunctionInput(list.items)
      const output = parse(input.text)
      output.items[0].spec.l.push('c')
      const out = readFunctionOutput(JSON.stringify(output), input)
      const text = unwrapToYaml(out.list)
      expect(text).to.equal('# head\napiVersion: v1 # av\nkind: A\nmetadata:\n  name: a\nspec:\n  # before list\n  l:\n  - a # on a\n  - b\n  - c\n')
      const again = readFunctionOutput(input.text, input)
      expect(unwrapToYaml(again.list)).to.equal('# head\napiVersion: v1 # av\nkind: A\nmetadata:\n  name: a\nspec:\n  # before list\n  l:\n  - a # on a\n  - b\n')
    })

    it('reconciles a path changed only in its legacy or only in its internal form', () => {
      const list = parseResourceList(rl('- apiVersion: v1\n  kind: A\n  metadata:\n    name: a\n    annotations:\n      internal.config.kubernetes.io/path: a.yaml\n'))
      const input = buildFunctionInput(list.items)
      const edit = (f: (annos: Record<string, string>) => void) => {
        const o = parse(input.text)
        f(o.items[0].metadata.annotations)
        return readFunctionOutput(JSON.stringify(o), input).list.items[0]!
      }
      let item = edit((a) => (a['config.kubernetes.io/path'] = 'b.yaml'))
      expect(getAnnotation(item, 'internal.config.kubernetes.io/path')).to.equal('b.yaml')
      item = edit((a) => (a['internal.config.kubernetes.io/path'] = 'c.yaml'))
      expect(getAnnotation(item, 'config.kubernetes.io/path')).to.equal('c.yaml')
      expect(getAnnotation(item, 'internal.config.kubernetes.io/id')).to.equal(undefined)
      expect(getAnnotation(item, 'internal.config.kubernetes.io/annotations-migration-resource-id')).to.equal(undefined)
      expect(() =>
        edit((a) => {
          a['config.kubernetes.io/path'] = 'd.yaml'
          a['internal.config.kubernetes.io/path'] = 'e.yaml'
        }),
      ).to.throw(FnrError, 'resource input to function has mismatched legacy and internal path annotations')
    })

    it('reads results even from a bare list of documents, and results from the ResourceList', () => {
      const out = readFunctionOutput(
        rl('- apiVersion: v1\n  kind: A\n  metadata:\n    name: a\nresults:\n- message: hi\n  severity: warning\n'),
      )
      expect(out.results).to.deep.equal([{message: 'hi', severity: 'warning'}])
      expect(getAnnotation(out.list.items[0]!, 'internal.config.kubernetes.io/path')).to.equal('a_a.yaml')
      const empty = readFunctionOutput('')
      expect(empty.list.items).to.deep.equal([])
      expect(empty.results).to.deep.equal([])
    })
  })
})
