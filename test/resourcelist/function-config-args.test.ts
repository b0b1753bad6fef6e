/** functionConfig from `--` arguments and from a file (src/lib/resourcelist/function-config.ts), in process; what kpt sends as functionConfig is compared in ./function-config.test.ts. */
import {writeFileSync} from 'node:fs'
import {join} from 'node:path'

import {expect} from 'chai'
import {parse} from 'yaml'

import {FnrError} from '../../src/lib/errors.js'
import {functionConfigFromArgs, readFunctionConfig} from '../../src/lib/resourcelist/index.js'
import {stringifyNode} from '../../src/lib/resourcelist/yaml.js'
import {thrown} from '../support/fnr-error.js'
import {Scratch} from './helpers.js'

describe('resourcelist functionConfig', () => {
  const scratch = new Scratch()
  after(() => scratch.cleanup())

  describe('functionConfigFromArgs', () => {
    it('builds the ConfigMap kpt builds, every value a string', () => {
      const fc = functionConfigFromArgs(['namespace=prod', 'x=a b', 'y=true', 'n=5', 'e=x=y', 'd=', 'k=null', 'q=~', 'o=yes', 's=a: b', 'h=#x'])
      expect(fc.toJSON()).to.deep.equal({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: {name: 'function-input'},
        data: {namespace: 'prod', x: 'a b', y: 'true', n: '5', e: 'x=y', d: '', k: 'null', q: '~', o: 'yes', s: 'a: b', h: '#x'},
      })
      // and it reads back with the same types in any YAML parser
      expect(parse(stringifyNode(fc)).data).to.deep.equal(fc.toJSON().data)
      // kpt's exact line (flow style; keys like y and n stay plain), measured with kpt 1.0.0-beta.56
      expect(stringifyNode(fc)).to.include('data: {namespace: prod, x: a b, y: "true", n: "5", e: x=y, d: "", k: "null", q: "~", o: "yes", s: "a: b", h: "#x"}\n')
    })

    it('writes data: {} when there are no arguments', () => {
      expect(stringifyNode(functionConfigFromArgs([]))).to.equal('apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: function-input\ndata: {}\n')
    })

    it('takes a first argument without = as the kind, as kpt does', () => {
      expect(functionConfigFromArgs(['MyKind', 'a=b']).toJSON()).to.deep.include({kind: 'MyKind', data: {a: 'b'}})
    })

    it('rejects other arguments without = and empty keys', () => {
      let e = thrown(() => functionConfigFromArgs(['a=b', 'c']))
      expect(e.kind).to.equal('InvalidArgument')
      expect(e.message).to.equal('args must have keys and values separated by =, got "c"')
      e = thrown(() => functionConfigFromArgs(['=c']))
      expect(e.message).to.equal('args must have a key before =, got "=c"')
    })

    it('lets a later duplicate win', () => {
      expect(functionConfigFromArgs(['a=1', 'b=2', 'a=3']).toJSON().data).to.deep.equal({a: '3', b: '2'})
    })
  })

  describe('readFunctionConfig', () => {
    it('fails like kpt on missing, empty, multiple and non-KRM configs', async () => {
      const write = (content: string) => {
        const f = join(scratch.root, `fc-${Math.random().toString(36).slice(2)}.yaml`)
        writeFileSync(f, content)
        return f
      }
      const err = async (file: string) => (await readFunctionConfig(file).catch((e: unknown) => e)) as FnrError
      const missing = join(scratch.root, 'nope.yaml')
      expect((await err(missing)).message).to.equal(`missing function config file: ${missing}`)
      let f = write('')
      expect((await err(f)).message).to.equal(`functionConfig ${JSON.stringify(f)} must contain one config, got 0`)
      f = write('apiVersion: v1\nkind: A\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: A\nmetadata:\n  name: b\n')
      expect((await err(f)).message).to.equal(`functionConfig ${JSON.stringify(f)} must not contain more than one config, got 2`)
      f = write('kind: Foo\nspec: 1\n')
      expect((await err(f)).message).to.equal(`functionConfig ${JSON.stringify(f)}: resource must have \`apiVersion\``)
      f = write('I am not a valid config file\n')
      const e = await err(f)
      expect(e.kind).to.equal('InvalidArgument')
      expect(e.message).to.equal(`failed to read functionConfig ${JSON.stringify(f)}: wrong node kind: expected MappingNode but got ScalarNode: node contents:\nI am not a valid config file`)
      f = write('apiVersion: v1\nkind: A\nmetadata:\n  name: x\n')
      expect((await readFunctionConfig(f)).toJSON().metadata.name).to.equal('x')
    })
  })
})
