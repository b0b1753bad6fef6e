/**
 * The functionConfig of `fnr eval` and of a Kptfile's `configMap:` (src/lib/resourcelist/function-config.ts)
 * without kpt: the ConfigMap built from `-- k=v` arguments (kpt fn eval's field order, keys quoted
 * only where YAML would not read them back as strings), the ConfigMap kpt fn render builds, and the
 * errors of a --fn-config file. Byte-for-byte comparisons with kpt itself are
 * test/resourcelist/function-config.test.ts.
 */
import {mkdir, writeFile} from 'node:fs/promises'
import net from 'node:net'
import path from 'node:path'

import {expect} from 'chai'
import {parse} from 'yaml'

import {FUNCTION_INPUT_NAME, functionConfigFromArgs, kptfileConfigMap, parseFunctionConfig, readFunctionConfig} from '../../src/lib/resourcelist/function-config.js'
import {stringifyNode} from '../../src/lib/resourcelist/yaml.js'
import {failure, thrown} from '../support/fnr-error.js'
import {TempDirs} from '../support/tmp.js'

const dataLine = (text: string): string => text.split('\n').find((l) => l.startsWith('data:'))!

describe('functionConfig (rules)', () => {
  describe('functionConfigFromArgs', () => {
    it('names the ConfigMap function-input', () => {
      expect(FUNCTION_INPUT_NAME).to.equal('function-input')
      expect(functionConfigFromArgs(['a=b']).toJSON().metadata).to.deep.equal({name: 'function-input'})
    })

    it('kpt fn eval\'s field order is metadata, data, kind, apiVersion; the default is apiVersion, kind, metadata, data', () => {
      expect(stringifyNode(functionConfigFromArgs(['a=b'], {evalOrder: true}))).to.equal('metadata:\n  name: function-input\ndata: {a: b}\nkind: ConfigMap\napiVersion: v1\n')
      expect(stringifyNode(functionConfigFromArgs(['a=b']))).to.equal('apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: function-input\ndata: {a: b}\n')
    })

    it('a first argument alone is the kind, kept a string even when it reads as a number', () => {
      expect(functionConfigFromArgs(['MyKind']).toJSON()).to.deep.include({kind: 'MyKind', data: {}})
      const numeric = functionConfigFromArgs(['123', 'a=b'])
      expect(numeric.toJSON().kind).to.equal('123')
      expect(parse(stringifyNode(numeric)).kind).to.equal('123')
    })

    it('only the first argument can be the kind, and an empty first argument is not one', () => {
      expect(thrown(() => functionConfigFromArgs(['A', 'B'])).message).to.equal('args must have keys and values separated by =, got "B"')
      const empty = thrown(() => functionConfigFromArgs(['']))
      expect(empty.kind).to.equal('InvalidArgument')
      expect(empty.message).to.equal('args must have keys and values separated by =, got ""')
    })

    it('splits at the first =, so a value may hold more', () => {
      expect(functionConfigFromArgs(['url=http://x/?a=b']).toJSON().data).to.deep.equal({url: 'http://x/?a=b'})
    })

    it('quotes a key only where YAML would not read it back as a string', () => {
      const fc = functionConfigFromArgs(['true=x', '5=y', '-k=z', 'a b=c', ' s=1', 'n=2', 'on=3', 'a: b=5', 'null=6', '~=7'])
      const line = dataLine(stringifyNode(fc))
      expect(line).to.equal('data: {"true": x, "5": "y", "-k": z, a b: c, " s": "1", n: "2", on: "3", "a: b": "5", "null": "6", "~": "7"}')
      const back = parse(stringifyNode(fc)).data as Record<string, string>
      expect(Object.keys(back)).to.have.members(['true', '5', '-k', 'a b', ' s', 'n', 'on', 'a: b', 'null', '~'])
      expect(Object.values(back).every((v) => typeof v === 'string')).to.equal(true)
    })
  })

  describe('kptfileConfigMap (kpt fn render\'s ConfigMap from a Kptfile\'s configMap:)', () => {
    it('keeps the Kptfile\'s order; quotes a value only when it would read back as something else; keys plain where YAML allows', () => {
      const fc = kptfileConfigMap([['5', 'five'], ['b', '3'], ['c', 'true'], ['d', ''], ['e', 'yes'], ['', 'empty'], ['f', 'null'], ['g', '1.5']])
      const text = stringifyNode(fc)
      expect(text).to.equal('apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: function-input\ndata: {5: five, b: "3", c: "true", d: "", e: yes, "": empty, f: "null", g: "1.5"}\n')
    })

    it('no pairs is data: {}', () => {
      expect(dataLine(stringifyNode(kptfileConfigMap([])))).to.equal('data: {}')
    })
  })

  describe('parseFunctionConfig', () => {
    it('each missing field is named, with the origin quoted', () => {
      expect(thrown(() => parseFunctionConfig('apiVersion: v1\nkind: A\n', 'fc.yaml')).message).to.equal('functionConfig "fc.yaml": resource must have `metadata.name`')
      expect(thrown(() => parseFunctionConfig('apiVersion: v1\nmetadata:\n  name: x\n', 'fc.yaml')).message).to.equal('functionConfig "fc.yaml": resource must have `kind`')
    })

    it('a document of comments only, or empty documents, holds no config', () => {
      for (const text of ['# only a comment\n', '---\n---\n']) {
        const err = thrown(() => parseFunctionConfig(text, 'fc.yaml'))
        expect(err.kind).to.equal('InvalidArgument')
        expect(err.message).to.equal('functionConfig "fc.yaml" must contain one config, got 0')
      }
    })

    it('a YAML error says where, without repeating the origin', () => {
      const err = thrown(() => parseFunctionConfig('a: [\n', 'fc.yaml'))
      expect(err.kind).to.equal('InvalidArgument')
      expect(err.message).to.match(/^failed to read functionConfig "fc\.yaml": MalformedYAMLError: line 2, column 1: /)
      expect(err.message.match(/fc\.yaml/g)).to.have.length(1)
    })

    it('metadata that is not a map is kpt\'s wrong node kind', () => {
      expect(thrown(() => parseFunctionConfig('apiVersion: v1\nkind: A\nmetadata: 5\n', 'fc.yaml')).message).to.equal('failed to read functionConfig "fc.yaml": wrong node kind: expected MappingNode for metadata')
    })

    it('keeps the fields and adds kpt\'s index annotations', () => {
      const fc = parseFunctionConfig('apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: "1"\n', 'fc.yaml').toJSON()
      expect(fc.data).to.deep.equal({a: '1'})
      expect(fc.metadata.annotations).to.deep.include({'config.kubernetes.io/index': '0', 'internal.config.kubernetes.io/index': '0'})
    })
  })

  describe('readFunctionConfig', () => {
    const temp = new TempDirs()
    let dir: string
    before(async () => {
      dir = await temp.make('fnr-fn-config-unit-')
    })
    after(() => temp.cleanup())

    it('refuses a device and a socket without reading them', async () => {
      const dev = await failure(readFunctionConfig('/dev/null'))
      expect(dev.kind).to.equal('InvalidArgument')
      expect(dev.message).to.equal('cannot read function config file /dev/null: not a regular file')
      const sock = path.join(dir, 'fc.sock')
      const server = net.createServer()
      await new Promise<void>((resolve) => server.listen(sock, resolve))
      try {
        expect((await failure(readFunctionConfig(sock))).message).to.equal(`cannot read function config file ${sock}: not a regular file`)
      } finally {
        await new Promise<void>((resolve) => server.close(() => resolve()))
      }
    })

    it('a directory or a path through a file is an InvalidArgument naming the errno', async () => {
      const sub = path.join(dir, 'sub')
      await mkdir(sub)
      const d = await failure(readFunctionConfig(sub))
      expect(d.kind).to.equal('InvalidArgument')
      expect(d.message).to.equal(`cannot read function config file ${sub}: EISDIR`)
      const file = path.join(dir, 'plain.yaml')
      await writeFile(file, 'apiVersion: v1\nkind: A\nmetadata:\n  name: a\n')
      expect((await failure(readFunctionConfig(path.join(file, 'x')))).message).to.equal(`cannot read function config file ${path.join(file, 'x')}: ENOTDIR`)
    })

    it('names the file in parse errors', async () => {
      const file = path.join(dir, 'nameless.yaml')
      await writeFile(file, 'apiVersion: v1\nkind: A\n')
      expect((await failure(readFunctionConfig(file))).message).to.equal(`functionConfig ${JSON.stringify(file)}: resource must have \`metadata.name\``)
    })
  })
})
