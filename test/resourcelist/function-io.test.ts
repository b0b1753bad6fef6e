import {spawnSync} from 'node:child_process'
import {chmodSync, readFileSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'

import {expect} from 'chai'
import {parse, parseAllDocuments} from 'yaml'

import {FnrError} from '../../src/lib/errors.js'
import {
  buildFunctionInput,
  functionConfigFromArgs,
  getAnnotation,
  parseResourceList,
  readFunctionOutput,
  readPackage,
  sourcePathsOf,
  unwrapToYaml,
  wrapForStdout,
  writePackage,
  type ResourceList,
} from '../../src/lib/resourcelist/index.js'
import {copyTree, kpt, PACKAGES, readTree, requireKpt, Scratch, YAML_CJS} from './helpers.js'

/**
 * A function for kpt's edge cases (empty and missing items, plain documents, path and index
 * annotations, moves, comments), written with the yaml package. It drops the items' head
 * comments, so kpt does not duplicate them.
 */
const EDGE_FN = `#!/usr/bin/env node
const YAML = require(${JSON.stringify(YAML_CJS)})
const mode = process.argv[2]
let input = ''
process.stdin.on('data', (d) => (input += d))
process.stdin.on('end', () => {
  const doc = YAML.parseDocument(input)
  const items = doc.get('items')
  const find = (kind) => items.items.find((i) => i.get('kind') === kind)
  const out = (d) => process.stdout.write(String(d))
  const keepComments = mode.endsWith('+c')
  switch (mode.replace(/\\+c$/, '')) {
    case 'empty': return
    case 'emptyitems': return out('apiVersion: config.kubernetes.io/v1\\nkind: ResourceList\\nitems: []\\n')
    case 'bare': return out('apiVersion: v1\\nkind: ConfigMap\\nmetadata:\\n  name: x\\ndata:\\n  a: b\\n')
    case 'plain': return out('apiVersion: v1\\nkind: ConfigMap\\nmetadata:\\n  name: p1\\n---\\napiVersion: v1\\nkind: ConfigMap\\nmetadata:\\n  name: p2\\n')
    case 'removesvc': items.items = items.items.filter((i) => i.get('kind') !== 'Service'); break
    case 'newns': items.items.push(doc.createNode({apiVersion: 'v1', kind: 'Namespace', metadata: {name: 'newns'}})); break
    case 'newpath': items.items.push(doc.createNode({apiVersion: 'v1', kind: 'Namespace', metadata: {name: 'gen', annotations: {'internal.config.kubernetes.io/path': 'gen/ns.yaml'}}})); break
    case 'legacypath': items.items.push(doc.createNode({apiVersion: 'v1', kind: 'Namespace', metadata: {name: 'leg', annotations: {'config.kubernetes.io/path': 'legacy/ns.yaml'}}})); break
    case 'move': find('ConfigMap').setIn(['metadata', 'annotations', 'internal.config.kubernetes.io/path'], 'moved/cm.yaml'); break
    case 'movelegacy': find('ConfigMap').setIn(['metadata', 'annotations', 'config.kubernetes.io/path'], 'moved/cm.yaml'); break
    case 'strip': for (const i of items.items) { const a = i.getIn(['metadata', 'annotations']); if (a) a.items = a.items.filter((p) => !/^(config\\.k|internal\\.config\\.k)/.test(String(p.key.value ?? p.key))) } break
    case 'dup': items.items.push(items.items[items.items.length - 1].clone()); break
    case 'reverse': items.items.reverse(); break
    case 'escape': find('ConfigMap').setIn(['metadata', 'annotations', 'internal.config.kubernetes.io/path'], '../x.yaml'); break
    case 'nonkrm': items.items.push(doc.createNode({foo: 'bar'})); break
    case 'label': for (const i of items.items) i.setIn(['metadata', 'labels', 'fn'], 'yes'); break
    case 'json': return out(JSON.stringify({apiVersion: 'config.kubernetes.io/v1', kind: 'ResourceList', items: doc.toJS().items}))
    case 'nocomments': return out(YAML.stringify(doc.toJS()))
    case 'garbage': return out('a: b: c\\n')
    case 'cat': return out(input)
  }
  if (!keepComments) { items.commentBefore = undefined; for (const i of items.items) i.commentBefore = undefined }
  out(doc.toString())
})
`

/** What fnr eval DIR --exec FN will do, with this library. */
async function fnrEval(dir: string, fn: string, args: string[]): Promise<void> {
  const list = await readPackage([dir])
  const previous = sourcePathsOf(list.items)
  const input = buildFunctionInput(list.items, {functionConfig: functionConfigFromArgs([])})
  const r = spawnSync(fn, args, {input: input.text})
  if (r.status !== 0) throw new Error(`function failed: ${r.stderr}`)
  const out = readFunctionOutput(r.stdout, input)
  await writePackage(out.list.items, dir, {previousPaths: previous})
}

async function fnrOutput(list: ResourceList, fn: string, args: string[]) {
  const input = buildFunctionInput(list.items, {})
  const r = spawnSync(fn, args, {input: input.text})
  return readFunctionOutput(r.stdout, input)
}

describe('resourcelist function round trip', () => {
  const scratch = new Scratch()
  let fn: string
  let pkg: string
  before(() => {
    fn = join(scratch.root, 'edge.cjs')
    writeFileSync(fn, EDGE_FN)
    chmodSync(fn, 0o755)
    pkg = scratch.tree(PACKAGES.basic!, 'basic')
  })
  after(() => scratch.cleanup())

  describe('kpt\'s ResourceList edge cases, against kpt fn eval', () => {
    const same = ['empty', 'emptyitems', 'bare', 'plain', 'removesvc', 'newns', 'newpath', 'legacypath', 'move', 'movelegacy', 'strip', 'reverse', 'label', 'nocomments', 'cat']
    for (const mode of same) {
      it(`"${mode}": writes the same files as kpt`, async () => {
        const k = copyTree(scratch, pkg, 'kpt')
        const f = copyTree(scratch, pkg, 'fnr')
        const r = kpt(['fn', 'eval', k, '--exec', `${fn} ${mode}`])
        expect(r.status, r.stderr).to.equal(0)
        await fnrEval(f, fn, [mode])
        expect(readTree(f)).to.deep.equal(readTree(k))
      })
    }

    for (const [mode, message] of [
      ['dup', 'resource at path "sub/cm.yaml" and index "0" already exists'],
      ['escape', 'function must not modify resources outside of package: resource has path ../x.yaml'],
      ['nonkrm', 'output resource list must contain only KRM resources: _.yaml: resource must have `apiVersion`'],
    ] as const) {
      it(`"${mode}": fails like kpt and writes nothing`, async () => {
        const k = copyTree(scratch, pkg, 'kpt')
        const f = copyTree(scratch, pkg, 'fnr')
        const r = kpt(['fn', 'eval', k, '--exec', `${fn} ${mode}`])
        expect(r.status).to.equal(1)
        const e = (await fnrEval(f, fn, [mode]).catch((x: unknown) => x)) as FnrError
        expect(e).to.be.instanceOf(FnrError)
        expect(e.kind).to.equal('FunctionFailed')
        // kpt words the non-KRM case differently ("missing Resource metadata")
        if (mode !== 'nonkrm') expect(r.stderr).to.include(e.message)
        expect(e.message).to.equal(message)
        expect(readTree(f)).to.deep.equal(readTree(pkg))
        expect(readTree(k)).to.deep.equal(readTree(pkg))
      })
    }

    it('"garbage": fails with a MalformedYAMLError', async () => {
      const e = (await fnrEval(copyTree(scratch, pkg), fn, ['garbage']).catch((x: unknown) => x)) as FnrError
      expect(e.kind).to.equal('FunctionFailed')
      expect(e.message).to.match(/^function output: MalformedYAMLError: /)
    })

    it('"json": writes block YAML where kpt keeps JSON flow style (documented difference), comments restored', async () => {
      const f = copyTree(scratch, pkg, 'fnr')
      await fnrEval(f, fn, ['json'])
      const b = copyTree(scratch, pkg, 'fnr')
      await fnrEval(b, fn, ['cat'])
      const got = readTree(f)
      const want = readTree(b)
      expect(Object.keys(got)).to.deep.equal(Object.keys(want))
      for (const k of Object.keys(got)) {
        const docs = (t: string) => parseAllDocuments(t).map((d) => d.toJS())
        expect(docs(got[k]!)).to.deep.equal(docs(want[k]!))
        expect(got[k]).to.not.include('{')
      }
      // comments are restored from the input; quoting is not (as in kpt)
      expect(got['deploy.yaml']).to.equal(want['deploy.yaml']!.replace('"nginx"', 'nginx'))
    })

    it('a function that keeps head comments gets them once (kpt writes them twice)', async () => {
      const f = copyTree(scratch, pkg, 'fnr')
      await fnrEval(f, fn, ['newns+c'])
      const deploy = readTree(f)['deploy.yaml']!
      expect(deploy.match(/# leading comment/g)).to.have.length(1)
      expect(deploy.match(/# svc comment/g)).to.have.length(1)
      const k = copyTree(scratch, pkg, 'kpt')
      kpt(['fn', 'eval', k, '--exec', `${fn} newns+c`])
      expect(readTree(k)['deploy.yaml']!.match(/# leading comment/g)).to.have.length(2)
    })
  })

  describe('stdout and unwrap output, against kpt', () => {
    for (const mode of ['cat', 'newns', 'label']) {
      it(`"${mode}": -o stdout and -o unwrap match kpt byte for byte`, async () => {
        for (const o of ['stdout', 'unwrap'] as const) {
          const want = kpt(['fn', 'eval', pkg, '--exec', `${fn} ${mode}`, '-o', o])
          expect(want.status, want.stderr).to.equal(0)
          const out = await fnrOutput(await readPackage([pkg]), fn, [mode])
          expect(o === 'stdout' ? wrapForStdout(out.list) : unwrapToYaml(out.list)).to.equal(want.stdout)
        }
      })
    }

    it('plain multi-document stdin like kpt fn eval - (index from the reader, default paths)', async () => {
      const input = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: ns1\n---\n# c\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  annotations:\n    config.kubernetes.io/path: x.yaml\nspec:\n  l:\n    - wide\n'
      const want = kpt(['fn', 'eval', '-', '--exec', `${fn} cat`], {input})
      expect(want.status, want.stderr).to.equal(0)
      const out = await fnrOutput(parseResourceList(input), fn, ['cat'])
      expect(wrapForStdout(out.list)).to.equal(want.stdout)
      const wantUnwrap = kpt(['fn', 'eval', '-', '--exec', `${fn} cat`, '-o', 'unwrap'], {input})
      const out2 = await fnrOutput(parseResourceList(input), fn, ['cat'])
      expect(unwrapToYaml(out2.list)).to.equal(wantUnwrap.stdout)
    })

    it('the function receives what kpt sends (ids, migration ids, functionConfig from args)', async () => {
      const dump = join(scratch.root, 'dump.sh')
      writeFileSync(dump, `#!/bin/sh\ntee "$DUMP"\n`)
      chmodSync(dump, 0o755)
      const kptDump = join(scratch.root, 'kpt-in.yaml')
      const r = spawnSync(requireKpt(), ['fn', 'eval', copyTree(scratch, pkg), '--exec', dump, '--', 'namespace=prod', 'x=a b', 'y=true', 'n=5'], {
        env: {...process.env, DUMP: kptDump},
        encoding: 'utf8',
      })
      expect(r.status, r.stderr).to.equal(0)
      const list = await readPackage([pkg])
      const input = buildFunctionInput(list.items, {functionConfig: functionConfigFromArgs(['namespace=prod', 'x=a b', 'y=true', 'n=5'], {evalOrder: true})})
      const kptInput = readFileSync(kptDump, 'utf8')
      expect(parse(input.text)).to.deep.equal(parse(kptInput))
      // byte-identical, the functionConfig included (kpt eval's field order, flow-style data)
      expect(input.text.trimEnd()).to.equal(kptInput.trimEnd())
      // the input items are left without ids
      expect(getAnnotation(list.items[0]!, 'internal.config.kubernetes.io/id')).to.equal(undefined)
    })
  })
})
