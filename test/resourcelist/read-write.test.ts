import {expect} from 'chai'
import {parse} from 'yaml'

import {FnrError} from '../../src/lib/errors.js'
import {
  defaultPathFor,
  getAnnotation,
  IgnoreMatcher,
  parseResourceList,
  renderPackageFiles,
  stringifyResourceList,
  unwrapToYaml,
  wrapForStdout,
} from '../../src/lib/resourcelist/index.js'
import {globToRegExp} from '../../src/lib/resourcelist/krmignore.js'
import {deriveSeqIndent, resolvePlain, splitDocuments, toTyped} from '../../src/lib/resourcelist/yaml.js'
import {thrown} from '../support/fnr-error.js'

const RL = (items: string, rest = '') => `apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n${items}${rest}`

describe('resourcelist read and write', () => {
  describe('parseResourceList', () => {
    it('reads a wrapped ResourceList with comments, functionConfig and results', () => {
      const text = RL(
        '- # head\n  apiVersion: v1\n  kind: A # kind\n  metadata:\n    name: a\n',
        'functionConfig:\n  apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: fc\nresults:\n- message: m\n',
      )
      const list = parseResourceList(text)
      expect(list.wrapped).to.equal(true)
      expect(list.items).to.have.length(1)
      expect(list.items[0]!.commentBefore).to.equal(' head')
      expect(list.functionConfig!.toJSON().metadata.name).to.equal('fc')
      expect(list.results).to.not.equal(null)
      expect(stringifyResourceList(list.items)).to.equal(RL('- # head\n  apiVersion: v1\n  kind: A # kind\n  metadata:\n    name: a\n'))
      // a wrapped list's items are not annotated
      expect(getAnnotation(list.items[0]!, 'internal.config.kubernetes.io/index')).to.equal(undefined)
    })

    it('accepts other ResourceList versions and kind List', () => {
      for (const head of ['apiVersion: config.kubernetes.io/v1beta1\nkind: ResourceList\n', 'apiVersion: v1\nkind: List\n']) {
        const list = parseResourceList(`${head}items:\n- apiVersion: v1\n  kind: A\n  metadata:\n    name: a\n`)
        expect(list.items).to.have.length(1)
        expect(list.wrapped).to.equal(true)
      }
      expect(parseResourceList('apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n').items).to.deep.equal([])
    })

    it('reads JSON, and writes its items in block style with the same types', () => {
      const json = JSON.stringify({
        apiVersion: 'config.kubernetes.io/v1',
        kind: 'ResourceList',
        items: [{apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'j'}, data: {n: '5', b: 'true', e: '', y: 'y', l: [1, true, null], o: {}}}],
      })
      const list = parseResourceList(json)
      const text = unwrapToYaml(list)
      expect(text).to.equal(
        'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: j\ndata:\n  "n": "5"\n  b: "true"\n  e: ""\n  "y": "y"\n  l:\n  - 1\n  - true\n  - null\n  o: {}\n',
      )
      expect(parse(text)).to.deep.equal(JSON.parse(json).items[0])
      // flow YAML that is not strict JSON goes through the YAML parser, same result
      const flow = parseResourceList(`{apiVersion: config.kubernetes.io/v1, kind: ResourceList, items: [{apiVersion: v1, kind: A, metadata: {name: f}, l: [a]}]}`)
      expect(unwrapToYaml(flow)).to.equal('apiVersion: v1\nkind: A\nmetadata:\n  name: f\nl:\n- a\n')
    })

    it('keeps flow parts of block items', () => {
      const list = parseResourceList(RL('- apiVersion: v1\n  kind: A\n  metadata: {name: a}\n  l: [1, 2]\n'))
      expect(unwrapToYaml(list)).to.equal('apiVersion: v1\nkind: A\nmetadata: {name: a}\nl: [1, 2]\n')
    })

    it('reads plain documents like kpt fn eval - (index, seqindent, legacy path copied)', () => {
      const list = parseResourceList('apiVersion: v1\nkind: A\nmetadata:\n  name: a\nl:\n  - x\n---\n---\n# c\napiVersion: v1\nkind: B\nmetadata:\n  name: b\n  annotations:\n    config.kubernetes.io/path: p.yaml\n')
      expect(list.wrapped).to.equal(false)
      expect(list.items).to.have.length(2)
      const [a, b] = list.items
      expect(getAnnotation(a!, 'internal.config.kubernetes.io/index')).to.equal('0')
      expect(getAnnotation(a!, 'config.kubernetes.io/index')).to.equal('0')
      expect(getAnnotation(a!, 'internal.config.kubernetes.io/seqindent')).to.equal('wide')
      expect(getAnnotation(b!, 'internal.config.kubernetes.io/index')).to.equal('1')
      expect(getAnnotation(b!, 'internal.config.kubernetes.io/path')).to.equal('p.yaml')
      expect(b!.commentBefore).to.equal(' c')
      const bare = parseResourceList('apiVersion: v1\nkind: A\nmetadata:\n  name: a\n', {annotate: false})
      expect(getAnnotation(bare.items[0]!, 'internal.config.kubernetes.io/index')).to.equal(undefined)
    })

    it('reads empty input as an empty list and handles CRLF', () => {
      expect(parseResourceList('').items).to.deep.equal([])
      expect(parseResourceList('# just a comment\n').items).to.deep.equal([])
      const crlf = parseResourceList('apiVersion: v1\r\nkind: A\r\nmetadata:\r\n  name: a\r\n---\r\napiVersion: v1\r\nkind: B\r\nmetadata:\r\n  name: b\r\n')
      expect(crlf.items.map((i) => i.toJSON().kind)).to.deep.equal(['A', 'B'])
    })

    it('reports malformed input as one-line errors of the requested kind', () => {
      let e = thrown(() => parseResourceList('a: b: c\n'))
      expect(e.kind).to.equal('InvalidArgument')
      expect(e.message).to.match(/^stdin: MalformedYAMLError: /)
      expect(e.message).to.not.include('\n')
      e = thrown(() => parseResourceList('a: 1\n--- x\nb: 2\n', {origin: 'in.yaml', errorKind: 'FunctionFailed'}))
      expect(e.kind).to.equal('FunctionFailed')
      expect(e.message).to.equal('in.yaml: invalid document separator: --- x')
      e = thrown(() => parseResourceList(RL('- just a string\n')))
      expect(e.message).to.equal('stdin: items[0]: wrong node kind: expected MappingNode but got ScalarNode: node contents:\njust a string')
      e = thrown(() => parseResourceList('apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: 5\n'))
      expect(e.message).to.equal('stdin: items must be a list')
    })
  })

  describe('writing', () => {
    const annotated = RL(
      "- apiVersion: v1\n  kind: A\n  metadata:\n    name: a\n    annotations:\n      keep: me\n      internal.config.kubernetes.io/path: 'a.yaml'\n      internal.config.kubernetes.io/index: '0'\n      config.kubernetes.io/path: 'a.yaml'\n      config.kubernetes.io/index: '0'\n      internal.config.kubernetes.io/seqindent: 'wide'\n      internal.config.kubernetes.io/id: '1'\n      config.k8s.io/id: '1'\n  l:\n  - x\n",
    )

    it('wrapForStdout keeps path/index/seqindent and removes ids', () => {
      const out = wrapForStdout(parseResourceList(annotated))
      expect(out).to.include("internal.config.kubernetes.io/seqindent: 'wide'")
      expect(out).to.include("config.kubernetes.io/path: 'a.yaml'")
      expect(out).to.not.include('id:')
      expect(out).to.not.include('functionConfig')
    })

    it('unwrapToYaml removes every orchestrator annotation and honours seqindent', () => {
      expect(unwrapToYaml(parseResourceList(annotated))).to.equal('apiVersion: v1\nkind: A\nmetadata:\n  name: a\n  annotations:\n    keep: me\nl:\n  - x\n')
      expect(unwrapToYaml(parseResourceList(RL('- apiVersion: v1\n  kind: A\n  metadata:\n    name: a\n- apiVersion: v1\n  kind: B\n  metadata:\n    name: b\n')))).to.equal(
        'apiVersion: v1\nkind: A\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: B\nmetadata:\n  name: b\n',
      )
      expect(stringifyResourceList([])).to.equal('apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n')
    })

    it('defaults paths as <namespace>/<kind>_<name>.yaml', () => {
      const [a, b] = parseResourceList(RL('- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: cfg\n    namespace: old\n- apiVersion: v1\n  kind: Namespace\n  metadata:\n    name: newns\n')).items
      expect(defaultPathFor(a!)).to.equal('old/configmap_cfg.yaml')
      expect(defaultPathFor(b!)).to.equal('namespace_newns.yaml')
    })

    it('renders package files: JSON for a lone resource in a .json file, bare lists unwrapped, documents sorted by index', () => {
      const files = renderPackageFiles(
        parseResourceList(
          RL(
            [
              "- apiVersion: v1\n  kind: A\n  metadata:\n    name: second\n    annotations:\n      internal.config.kubernetes.io/path: m.yaml\n      internal.config.kubernetes.io/index: '1'\n",
              "- apiVersion: v1\n  kind: A\n  metadata:\n    name: first\n    annotations:\n      internal.config.kubernetes.io/path: m.yaml\n      internal.config.kubernetes.io/index: '0'\n",
              "- apiVersion: v1\n  kind: A\n  metadata:\n    name: j\n    annotations:\n      internal.config.kubernetes.io/path: j.json\n  data:\n    n: 5\n    s: '5'\n    t: <&>\n",
              "- bareSeqNodeWrappingKey:\n  - a\n  - b\n  metadata:\n    annotations:\n      internal.config.kubernetes.io/path: seq.yaml\n",
              "- apiVersion: v1\n  kind: A\n  metadata:\n    name: j1\n    annotations:\n      internal.config.kubernetes.io/path: two.json\n- apiVersion: v1\n  kind: A\n  metadata:\n    name: j2\n    annotations:\n      internal.config.kubernetes.io/path: two.json\n",
            ].join(''),
          ),
        ).items,
      )
      expect(Object.fromEntries(files)).to.deep.equal({
        'j.json': '{\n  "apiVersion": "v1",\n  "data": {\n    "n": 5,\n    "s": "5",\n    "t": "\\u003c\\u0026\\u003e"\n  },\n  "kind": "A",\n  "metadata": {\n    "name": "j"\n  }\n}\n',
        'm.yaml': 'apiVersion: v1\nkind: A\nmetadata:\n  name: first\n---\napiVersion: v1\nkind: A\nmetadata:\n  name: second\n',
        'seq.yaml': '- a\n- b\n',
        'two.json': 'apiVersion: v1\nkind: A\nmetadata:\n  name: j1\n---\napiVersion: v1\nkind: A\nmetadata:\n  name: j2\n',
      })
    })

    it('rejects a non-numeric index', () => {
      const items = parseResourceList(RL("- apiVersion: v1\n  kind: A\n  metadata:\n    name: a\n    annotations:\n      internal.config.kubernetes.io/path: a.yaml\n      internal.config.kubernetes.io/index: 'x'\n")).items
      expect(() => renderPackageFiles(items)).to.throw(FnrError, 'unable to parse config.kubernetes.io/index x')
    })
  })

  describe('yaml helpers', () => {
    it('splits documents like kyaml', () => {
      expect(splitDocuments('a: 1\n---\nb: 2\n')).to.deep.equal(['a: 1', 'b: 2\n'])
      expect(splitDocuments('---\na: 1\n--- # c\nb: 2')).to.deep.equal(['---\na: 1', 'b: 2'])
      expect(splitDocuments('a: 1\n---\n---\nb: 2')).to.deep.equal(['a: 1', '---\nb: 2'])
      expect(() => splitDocuments('a\n--- x\nb')).to.throw('invalid document separator: --- x')
      expect(splitDocuments('')).to.deep.equal([])
    })

    it('derives the sequence indentation like kyaml', () => {
      expect(deriveSeqIndent('a:\n- x\n')).to.equal('compact')
      expect(deriveSeqIndent('a:\n  - x\n')).to.equal('wide')
      expect(deriveSeqIndent('a:\n  # c\n  - x\n')).to.equal('wide')
      expect(deriveSeqIndent('a: "- x"\nb:\n  c:\n    - y\n')).to.equal('wide')
      expect(deriveSeqIndent('a: b\n')).to.equal('compact')
      expect(deriveSeqIndent('a: x - y\nl:\n- z\n')).to.equal('compact')
    })

    it('types plain scalars like go-yaml v3', () => {
      const cases: Array<[string, unknown]> = [
        ['5', 5], ['-5', -5], ['0x1F', 31], ['0o17', 15], ['017', 15], ['1_000', 1000], ['1.5', 1.5], ['1e3', 1000], ['.inf', Infinity],
        ['true', true], ['False', false], ['yes', 'yes'], ['~', null], ['', null], ['Null', null], ['1.2.3', '1.2.3'], ['0x', '0x'], ['08', 8],
      ]
      for (const [text, want] of cases) expect(resolvePlain(text), text).to.deep.equal(want)
      const list = parseResourceList(RL('- a: &x {k: 1, q: "1"}\n  b: *x\n  c: !!str 5\n  d: !!int "7"\n  e: \'true\'\n'))
      expect(toTyped(list.items[0])).to.deep.equal({a: {k: 1, q: '1'}, b: {k: 1, q: '1'}, c: '5', d: 7, e: 'true'})
    })

    it('compiles .krmignore globs like filepath.Match', () => {
      expect(globToRegExp('*.yaml').test('a.yaml')).to.equal(true)
      expect(globToRegExp('*.yaml').test('a/b.yaml')).to.equal(false)
      expect(globToRegExp('a?c').test('abc')).to.equal(true)
      expect(globToRegExp('[a-c]x').test('bx')).to.equal(true)
      expect(globToRegExp('[^a-c]x').test('bx')).to.equal(false)
      expect(globToRegExp('\\*').test('*')).to.equal(true)
      expect(globToRegExp('a.b').test('axb')).to.equal(false)
      const m = new IgnoreMatcher('# comment\n\n  x/  \n!keep.yaml\n*.yaml\n')
      expect(m.ignores('x', true)).to.equal(true)
      expect(m.ignores('x', false)).to.equal(false)
      expect(m.ignores('sub/a.yaml', false)).to.equal(true)
      expect(m.ignores('sub/keep.yaml', false)).to.equal(false)
    })
  })
})
