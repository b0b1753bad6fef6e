import {expect} from 'chai'
import {parse} from 'yaml'

import {FnrError} from '../../src/lib/errors.js'
import {sourcePackage} from '../../src/lib/resourcelist/index.js'
import {KRMIGNORE_FILES, pathsOf} from '../support/package-source.js'
import {kpt, PACKAGES, Scratch} from './helpers.js'

describe('resourcelist source', () => {
  const scratch = new Scratch()
  after(() => scratch.cleanup())

  describe('interop with kpt fn source', () => {
    for (const name of Object.keys(PACKAGES)) {
      it(`produces the same ResourceList as kpt for the "${name}" package (byte for byte)`, async () => {
        const dir = scratch.tree(PACKAGES[name]!, name)
        const want = kpt(['fn', 'source', dir])
        expect(want.status, want.stderr).to.equal(0)
        const got = await sourcePackage([dir])
        expect(parse(got)).to.deep.equal(parse(want.stdout))
        expect(got).to.equal(want.stdout)
      })
    }

    it('matches kpt for non-KRM documents and bare lists (passed through by source)', async () => {
      const dir = scratch.tree({
        'values.yaml': 'foo: bar\n',
        'seq.yaml': '- a\n- b\n',
        'flow.yaml': '{}\n',
        'legacy.yaml': 'apiVersion: v1\nkind: A\nmetadata:\n  name: x\n  annotations:\n    config.kubernetes.io/path: foo/bar.yaml\n    internal.config.kubernetes.io/id: "3"\n',
        'emptyannos.yaml': 'apiVersion: v1\nkind: A\nmetadata:\n  name: y\n  annotations: {}\n  labels:\n    l: v\n',
        'null.yaml': 'null\n',
      })
      const want = kpt(['fn', 'source', dir])
      expect(want.status, want.stderr).to.equal(0)
      const got = await sourcePackage([dir], {requireKrm: false})
      expect(got).to.equal(want.stdout)
      const e = (await sourcePackage([dir]).catch((x: unknown) => x)) as FnrError
      expect(e).to.be.instanceOf(FnrError)
      expect(e.message).to.match(/^input resource list must contain only KRM resources: /)
    })

    it('reads a single file like kpt (path is the base name)', async () => {
      const dir = scratch.tree(PACKAGES.basic!)
      const want = kpt(['fn', 'source', `${dir}/deploy.yaml`])
      expect(await sourcePackage([`${dir}/deploy.yaml`])).to.equal(want.stdout)
    })

    it('follows symlinked files but not symlinked directories, like kpt', async () => {
      const dir = scratch.tree({
        'target/t.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: t\n',
        'linkdir': '->target',
        'linkfile.yaml': '->target/t.yaml',
      })
      const want = kpt(['fn', 'source', dir])
      const got = await sourcePackage([dir])
      expect(got).to.equal(want.stdout)
      expect(pathsOf(got)).to.deep.equal(['linkfile.yaml#0', 'target/t.yaml#0'])
    })
  })

  describe('.krmignore', () => {
    const patterns = [
      '*.json',
      'x/',
      '/a.yaml',
      'a.yaml',
      'x/a.yaml',
      'sub/x',
      'deep',
      '/sub/*.yaml',
      'sub/*.yaml',
      '*/a.yaml',
      '**/a.yaml',
      '  a.yaml  ',
      'a.yaml\n!/x/a.yaml',
      '!a.yaml\na.yaml',
      '#a.yaml',
      'sub',
      'sub/',
      '/sub',
      'a.*',
      '[ab].json',
      '[^a].json',
      'a?yaml',
      'sub/**',
      'sub/x/',
      '/sub/x/a.yaml',
      '*',
    ]
    for (const pattern of patterns) {
      it(`ignores the same files as kpt for ${JSON.stringify(pattern)}`, async () => {
        const dir = scratch.tree({...KRMIGNORE_FILES, '.krmignore': `${pattern}\n`})
        const want = kpt(['fn', 'source', dir])
        expect(want.status, want.stderr).to.equal(0)
        expect(pathsOf(await sourcePackage([dir]))).to.deep.equal(pathsOf(want.stdout))
      })
    }

  })
})
