/**
 * Reading a function's output while keeping the items it wrote back unchanged (reuse.ts, used by
 * fnr render): the list must be the one the whole parse gives, for every layout and edit, and the
 * shortcut must step aside where it cannot be sure.
 */
import {expect} from 'chai'
import type {YAMLMap} from 'yaml'

import {FnrError} from '../../src/lib/errors.js'
import {
  buildFunctionInput,
  readFunctionOutputInterruptible,
  readPackage,
  renderPackageFiles,
  stringifyResourceList,
  type FunctionOutput,
} from '../../src/lib/resourcelist/index.js'
import {parseItemBlocksInterruptible} from '../../src/lib/resourcelist/read.js'
import {endsInComment, mergeReused, planReuse, splitListItems} from '../../src/lib/resourcelist/reuse.js'
import {Scratch} from './helpers.js'

const HEAD = 'apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n'

/** A package with the comments, quoting and layouts the reader keeps. */
const FILES: Record<string, string> = {
  'a.yaml': `# head of a
apiVersion: v1
kind: ConfigMap
metadata:
  name: a # the name
  labels:
    tier: "web"
data:
  k: 'foo'
  n: 0x1F
  multi: |
    line one

    line three
  folded: >-
    a folded
    text
---
# head of b
apiVersion: v1
kind: ConfigMap
metadata:
  name: b
data:
  list: [x, y]
  empty: {}
`,
  'dir/deploy.yaml': `apiVersion: apps/v1
kind: Deployment
metadata:
  name: d
spec:
  template:
    spec:
      containers:
        - name: main # wide sequence
          image: "nginx:1.25"
          args:
            - --port
            - "8080"
`,
  'c.json': '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"n": "1", "t": true}}\n',
  'key-comment.yaml': `apiVersion: v1
kind: ConfigMap
metadata:
  name: kc
  annotations: # over a map
    x: "1"
data:
  k: v
`,
}

/** What a function may do to the ResourceList text it was given. */
const EDITS: Record<string, (text: string) => string> = {
  'writes its input back': (t) => t,
  'reverses the items': (t) => {
    const s = splitListItems(t)!
    return HEAD + [...s.items].reverse().join('') + s.tail
  },
  'changes one item': (t) => t.replace('k: \'foo\'', 'k: \'bar\''),
  'changes one item and drops its comments': (t) => t.replace('  name: a # the name\n', '  name: a\n').replace('- # head of a\n  ', '- '),
  'deletes one item': (t) => {
    const s = splitListItems(t)!
    return HEAD + s.items.filter((b) => !b.includes('name: b\n')).join('') + s.tail
  },
  'adds an item first': (t) => t.replace('\nitems:\n', '\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: new # added\n'),
  'drops the functionConfig and adds results': (t) => `${t.slice(0, t.indexOf('functionConfig:'))}results:\n- message: fine\n  severity: info\n`,
  'adds a comment at the end of an item': (t) => t.replace('    empty: {}\n', '    empty: {}\n    # trailing\n'),
  'adds an anchor and an alias': (t) => t.replace("k: 'foo'", "k: &k 'foo'").replace('n: 0x1F', 'n: *k'),
  'writes an item twice': (t) => {
    const s = splitListItems(t)!
    return HEAD + s.items.join('') + s.items[0] + s.tail
  },
  'lays the items out in flow style': (t) => t.replace('\nitems:\n', '\nitems: [{apiVersion: v1, kind: ConfigMap, metadata: {name: flow}}]\nx:\n'),
  'changes every item': (t) => t.replace(/\n {2}kind: /g, '\n  # edited\n  kind: '),
  'changes every item and adds blank lines between them': (t) => t.replace(/([^:])\n- /g, '$1\n\n- ').replace(/\n {2}kind: /g, '\n  kind:  '),
  'changes every item, one to a duplicate key': (t) => t.replace(/\n {2}kind: /g, '\n  kind: ').replace('\n  kind: ConfigMap', '\n  kind: ConfigMap\n  kind: Secret'),
  'changes every item, one to a key-line comment over a map and a multi-line value': (t) =>
    t.replace(/\n {2}kind: /g, '\n  kind:   ').replace('  labels:\n', '  labels: # over the labels\n').replace("k: 'foo'", 'k: a plain\n      scalar on two lines'),
  'changes every item, one to a syntax error': (t) => t.replace(/\n {2}kind: /g, '\n  kind:  ').replace("k: 'foo'", "k: 'foo"),
  'puts a comment at column 0 between items': (t) => t.replace('\n- apiVersion: apps/v1', '\n# between\n- apiVersion: apps/v1'),
}

describe('resourcelist: keeping the items a function gives back unchanged (reuse.ts)', function () {
  this.timeout(60_000)
  const scratch = new Scratch()
  let pkg: string
  before(() => {
    pkg = scratch.tree(FILES)
  })
  after(() => scratch.cleanup())

  /** The package's items as render sends them, the input text, and the output read both ways. */
  async function both(edit: (text: string) => string): Promise<{whole: FunctionOutput | FnrError; reused: FunctionOutput | FnrError; items: YAMLMap[]}> {
    const read = async (): Promise<YAMLMap[]> => (await readPackage([pkg])).items
    const functionConfig = (await readPackage([pkg])).items[0]!
    const run = async (reuse: boolean, items: YAMLMap[]): Promise<FunctionOutput | FnrError> => {
      const input = buildFunctionInput(items, {functionConfig, keepItemTexts: reuse})
      try {
        return await readFunctionOutputInterruptible(edit(input.text), input, undefined, {packageRelativePaths: true, reuseUnchanged: reuse})
      } catch (error) {
        if (error instanceof FnrError) return error
        throw error
      }
    }
    const items = await read()
    return {whole: await run(false, await read()), reused: await run(true, items), items}
  }

  const rendered = (o: FunctionOutput): {list: string; files: Record<string, string>} => ({
    list: stringifyResourceList(o.list.items),
    files: Object.fromEntries(renderPackageFiles(o.list.items.map((i) => i.clone() as YAMLMap))),
  })

  for (const [name, edit] of Object.entries(EDITS)) {
    it(`the same list as the whole parse when the function ${name}`, async () => {
      const {whole, reused} = await both(edit)
      if (whole instanceof FnrError) {
        expect(reused).to.be.instanceOf(FnrError)
        expect((reused as FnrError).message).to.equal(whole.message)
        return
      }
      expect(reused).not.to.be.instanceOf(FnrError)
      const r = reused as FunctionOutput
      expect(rendered(r)).to.deep.equal(rendered(whole))
      expect(r.results).to.deep.equal(whole.results)
    })
  }

  it('keeps the very nodes of the unchanged items and parses only the changed one (comments and quoting untouched)', async () => {
    const {reused, items} = await both(EDITS['changes one item']!)
    const out = (reused as FunctionOutput).list.items
    expect(out).to.have.length(items.length)
    // All but the changed one, and the one read from JSON (flow style, which the parse turns into block style).
    const parsed = out.filter((i) => !items.includes(i))
    expect(parsed).to.have.length(2)
    expect(stringifyResourceList([parsed[0]!])).to.contain("k: 'bar'").and.to.contain('# head of a').and.to.contain('name: a # the name')
    expect(stringifyResourceList([parsed[1]!])).to.contain('"name": "c"')
    expect(items.find((i) => i.flow)).to.not.equal(undefined)
  })

  it('reads the lists where every item changed block by block (the specs above compare them with the whole parse)', async () => {
    const functionConfig = (await readPackage([pkg])).items[0]!
    for (const name of ['changes every item', 'changes every item and adds blank lines between them', 'changes every item, one to a key-line comment over a map and a multi-line value']) {
      const items = (await readPackage([pkg])).items
      const input = buildFunctionInput(items, {functionConfig, keepItemTexts: true})
      const plan = planReuse(EDITS[name]!(input.text), input.sent!.items, input.sent!.texts)
      expect(plan?.changed, name).to.have.length(items.length)
      expect(await parseItemBlocksInterruptible(plan!.changed), name).to.have.length(items.length)
    }
  })

  it('keeps every node, in the function\'s order, when the function only reorders', async () => {
    const {reused, items} = await both(EDITS['reverses the items']!)
    const out = (reused as FunctionOutput).list.items
    expect(out).to.have.length(items.length)
    // Every node kept in reverse order, but the one read from JSON (flow style), which is parsed.
    out.forEach((item, n) => {
      const from = items[items.length - 1 - n]!
      if (from.flow) expect(item).to.not.equal(from)
      else expect(item).to.equal(from)
    })
  })

  it('keeps an item given back twice only once', async () => {
    const {reused, items} = await both(EDITS['writes an item twice']!)
    // Two items at the same path and index: the output invariant refuses it, as the whole parse does.
    expect(reused).to.be.instanceOf(FnrError)
    expect(items.length).to.be.greaterThan(0)
  })

  it('steps aside for anchors and aliases, comments that end an item, comments at column 0, flow style', () => {
    const item = {flow: false} as YAMLMap
    const block = '- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a\n'
    expect(planReuse(HEAD + block, [item], [block])?.kept).to.deep.equal([item])
    expect(planReuse(`${HEAD + block}  x: &a 1\n`, [item], [block])).to.equal(undefined)
    expect(planReuse(`${HEAD + block}  y: *a\n`, [item], [block])).to.equal(undefined)
    expect(planReuse(`${HEAD + block}  y: !!str 1\n`, [item], [block])).to.equal(undefined)
    expect(planReuse(`${HEAD + block}  # the end\n`, [item], [block])).to.equal(undefined)
    expect(planReuse(`${HEAD + block}# col 0\n${block}`, [item], [block])).to.equal(undefined)
    expect(planReuse(`${HEAD.replace('items:\n', 'items: [')}]\n`, [item], [block])).to.equal(undefined)
    // A flow-style input item is never kept: its block is parsed.
    expect(planReuse(HEAD + block, [{flow: true} as YAMLMap], [block])?.kept).to.deep.equal([undefined])
  })

  it('splits only the layout it knows', () => {
    const a = '- a: 1\n  b:\n  - x\n'
    const b = '-\n  c: 2\n\n  d: |\n    t\n'
    expect(splitListItems(`${HEAD}${a}${b}functionConfig:\n  x: 1\n`)).to.deep.equal({items: [a, b], tail: 'functionConfig:\n  x: 1\n'})
    expect(splitListItems(`${HEAD}${a}`)).to.deep.equal({items: [a], tail: ''})
    expect(splitListItems(`${HEAD}`)).to.deep.equal({items: [], tail: ''})
    for (const other of [`${HEAD}  - a: 1\n`, `${HEAD}${a}---\n`, `${HEAD}${a}# c\n`, `${HEAD}-x\n`, `${HEAD}${a}`.replace(/\n/g, '\r\n'), `{"apiVersion": "v1"}`, `kind: ResourceList\n${HEAD}`]) {
      expect(splitListItems(other), other).to.equal(undefined)
    }
  })

  it('endsInComment looks at the last line that is not blank', () => {
    expect(endsInComment('- a: 1\n  # c\n')).to.equal(true)
    expect(endsInComment('- a: 1\n  # c\n\n  \n')).to.equal(true)
    expect(endsInComment('- a: 1 # c\n')).to.equal(false)
    expect(endsInComment('- # head\n  a: 1\n')).to.equal(false)
    expect(endsInComment('# only')).to.equal(true)
    expect(endsInComment('\n\n')).to.equal(false)
  })

  it('mergeReused refuses another number of parsed items, and a frame that held items or was no ResourceList', () => {
    const item = {flow: false} as YAMLMap
    const plan = {frame: '', changed: ['- b: 1\n'], kept: [item, undefined]}
    const frame = {apiVersion: 'v1', kind: 'ResourceList', items: [] as YAMLMap[], functionConfig: null, results: null, wrapped: true}
    const other = {flow: false} as YAMLMap
    expect(mergeReused(plan, frame, [])).to.equal(undefined)
    expect(mergeReused(plan, frame, [other, other])).to.equal(undefined)
    expect(mergeReused(plan, {...frame, items: [other]}, [other])).to.equal(undefined)
    expect(mergeReused(plan, {...frame, wrapped: false}, [other])).to.equal(undefined)
    expect(mergeReused(plan, frame, [other])?.items).to.deep.equal([item, other])
  })

  it('parses each changed block on its own, and the text around the items once', () => {
    const item = {flow: false} as YAMLMap
    const a = '- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a\n'
    const b = a.replace('name: a', 'name: b')
    const plan = planReuse(`${HEAD}${b}${a}${b.replace('name: b', 'name: c')}functionConfig:\n  x: 1\n`, [item], [a])
    expect(plan?.kept).to.deep.equal([undefined, item, undefined])
    expect(plan?.changed).to.deep.equal([b, b.replace('name: b', 'name: c')])
    expect(plan?.frame).to.equal(`${HEAD}functionConfig:\n  x: 1\n`)
    // Nothing unchanged, nothing sent: every block is parsed on its own.
    expect(planReuse(HEAD + b, [item], [a])?.changed).to.deep.equal([b])
    expect(planReuse(HEAD + b, [], [])?.kept).to.deep.equal([undefined])
  })

  it('reads no block that is not exactly one item without an error: the whole parse gives the message', async () => {
    for (const block of ['- a: 1\n  a: 2\n', '- a: [1\n', '- x\n', '- - x\n', '- a: 1\n- b: 2\n']) {
      expect(await parseItemBlocksInterruptible([block]), block).to.equal(undefined)
    }
    const items = await parseItemBlocksInterruptible(['- a: 1\n\n  b: {c: 2}\n', '- {d: 3}\n'])
    expect(items?.map((i) => stringifyResourceList([i]))).to.deep.equal([
      `${HEAD}- a: 1\n  b: {c: 2}\n`,
      `${HEAD}- d: 3\n`,
    ])
  })
})
