/** Reading a package (src/lib/resourcelist/source.ts, read.ts), in process: annotations, comments, KRM checks, errors, and a .krmignore case kpt gets wrong; compared with kpt fn source in ./source.test.ts. */
import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import {getAnnotation, readPackage, sourcePackage, sourcePathsOf} from '../../src/lib/resourcelist/index.js'
import {KRMIGNORE_FILES, pathsOf} from '../support/package-source.js'
import {PACKAGES, Scratch} from './helpers.js'

describe('resourcelist source', () => {
  const scratch = new Scratch()
  after(() => scratch.cleanup())

  describe('.krmignore', () => {
    it('matches anchored directory patterns that kpt misses (documented difference)', async () => {
      const dir = scratch.tree({...KRMIGNORE_FILES, '.krmignore': '/x/\n/sub/x\n'})
      const got = pathsOf(await sourcePackage([dir]))
      expect(got).to.not.include('x/a.yaml#0')
      expect(got).to.not.include('sub/x/a.yaml#0')
      expect(got).to.include('sub/a.yaml#0')
    })
  })

  describe('reading', () => {
    it('annotates items with path, index and seqindent (internal and legacy)', async () => {
      const dir = scratch.tree(PACKAGES.basic!)
      const list = await readPackage([dir])
      const svc = list.items[2]!
      expect(getAnnotation(svc, 'internal.config.kubernetes.io/path')).to.equal('deploy.yaml')
      expect(getAnnotation(svc, 'config.kubernetes.io/path')).to.equal('deploy.yaml')
      expect(getAnnotation(svc, 'internal.config.kubernetes.io/index')).to.equal('1')
      expect(getAnnotation(svc, 'config.kubernetes.io/index')).to.equal('1')
      expect(getAnnotation(svc, 'internal.config.kubernetes.io/seqindent')).to.equal('compact')
      expect(getAnnotation(list.items[1]!, 'internal.config.kubernetes.io/seqindent')).to.equal('wide')
      expect(sourcePathsOf(list.items)).to.deep.equal(['Kptfile', 'deploy.yaml', 'sub/cm.yaml'])
    })

    it('keeps comments on the items', async () => {
      const dir = scratch.tree(PACKAGES.basic!)
      const list = await readPackage([dir])
      expect(list.items[1]!.commentBefore).to.equal(' leading comment')
      expect(await sourcePackage([dir])).to.include('- # leading comment\n  apiVersion: apps/v1')
    })

    it('rejects non-KRM documents naming the file, as kpt fn eval does', async () => {
      const dir = scratch.tree({'ok.yaml': 'apiVersion: v1\nkind: A\nmetadata:\n  name: a\n', 'values.yaml': 'foo: bar\n'})
      const error = await readPackage([dir]).catch((e: unknown) => e)
      expect(error).to.be.instanceOf(FnrError)
      expect((error as FnrError).kind).to.equal('InvalidArgument')
      expect((error as FnrError).message).to.equal('input resource list must contain only KRM resources: values.yaml: resource must have `apiVersion`')
      for (const [doc, missing] of [
        ['apiVersion: v1\nmetadata:\n  name: a\n', '`kind`'],
        ['apiVersion: v1\nkind: A\n', '`metadata.name`'],
      ] as const) {
        const d = scratch.tree({'r.yaml': doc})
        const e = (await readPackage([d]).catch((x: unknown) => x)) as FnrError
        expect(e.message).to.equal(`input resource list must contain only KRM resources: r.yaml: resource must have ${missing}`)
      }
      const list = await readPackage([dir], {requireKrm: false})
      expect(list.items).to.have.length(2)
    })

    it('lets kustomization files through the KRM check, as kpt does', async () => {
      const dir = scratch.tree({'kustomization.yaml': 'resources:\n- a.yaml\n'})
      expect((await readPackage([dir])).items).to.have.length(1)
    })

    it('reports malformed YAML and bad documents with the file name', async () => {
      const cases: Array<[string, RegExp]> = [
        ['a: [1\n', /^.*bad\.yaml: MalformedYAMLError: /],
        ['a: 1\n--- foo\nb: 2\n', /bad\.yaml: invalid document separator: --- foo$/],
        ['hello\n', /bad\.yaml: wrong node kind: expected MappingNode but got ScalarNode: node contents:\nhello$/],
        ['apiVersion: v1\nkind: A\nmetadata: 5\n', /bad\.yaml: wrong node kind/],
      ]
      for (const [content, re] of cases) {
        const dir = scratch.tree({'bad.yaml': content})
        const e = (await readPackage([dir], {requireKrm: false}).catch((x: unknown) => x)) as FnrError
        expect(e).to.be.instanceOf(FnrError)
        expect(e.kind).to.equal('InvalidArgument')
        expect(e.message).to.match(re)
        // One line, but for kpt's own `node contents:` tail (the node's YAML on the lines after it).
        expect(e.message.replace(/: node contents:\n[^]*$/, '')).to.not.include('\n')
      }
    })

    it('makes paths relative to each input and rejects overlapping inputs', async () => {
      const a = scratch.tree({'x.yaml': 'apiVersion: v1\nkind: A\nmetadata:\n  name: a\n'})
      const b = scratch.tree({'sub/y.yaml': 'apiVersion: v1\nkind: B\nmetadata:\n  name: b\n', 'single.yaml': 'apiVersion: v1\nkind: C\nmetadata:\n  name: c\n'})
      const list = await readPackage([a, `${b}/sub`, `${b}/single.yaml`])
      expect(list.items.map((i) => getAnnotation(i, 'internal.config.kubernetes.io/path'))).to.deep.equal(['x.yaml', 'y.yaml', 'single.yaml'])
      const e = (await readPackage([a, `${a}/x.yaml`]).catch((x: unknown) => x)) as FnrError
      expect(e.kind).to.equal('InvalidArgument')
      expect(e.message).to.match(/^input paths overlap: "x\.yaml"/)
    })

    it('fails clearly on a missing input', async () => {
      const e = (await readPackage([scratch.path('missing')]).catch((x: unknown) => x)) as FnrError
      expect(e.kind).to.equal('InvalidArgument')
      expect(e.message).to.match(/missing-\d+: no such file or directory$/)
      const e2 = (await readPackage([]).catch((x: unknown) => x)) as FnrError
      expect(e2.kind).to.equal('InvalidArgument')
    })
  })
})
