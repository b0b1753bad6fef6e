import {mkdirSync} from 'node:fs'

import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import {sinkToDirectory} from '../../src/lib/resourcelist/index.js'
import {kpt, PACKAGES, readTree, Scratch} from './helpers.js'

async function sinkError(input: string, dir: string): Promise<FnrError> {
  const e = await sinkToDirectory(input, dir).catch((x: unknown) => x)
  expect(e).to.be.instanceOf(FnrError)
  return e as FnrError
}

const RL = (items: string) => `apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n${items}`

describe('resourcelist sink', () => {
  const scratch = new Scratch()
  after(() => scratch.cleanup())

  describe('interop with kpt fn sink', () => {
    for (const name of Object.keys(PACKAGES)) {
      it(`writes the same files as kpt for kpt fn source of "${name}" (byte for byte)`, async () => {
        const dir = scratch.tree(PACKAGES[name]!, name)
        const source = kpt(['fn', 'source', dir]).stdout
        const want = scratch.path('kpt-out')
        const r = kpt(['fn', 'sink', want], {input: source})
        expect(r.status, r.stderr).to.equal(0)
        const got = scratch.path('fnr-out')
        await sinkToDirectory(source, got)
        expect(readTree(got)).to.deep.equal(readTree(want))
      })
    }

    it('writes plain multi-document input like kpt (default paths and indexes)', async () => {
      const input = [
        'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: ns1\n',
        '# c\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: ns1\nspec:\n  finalizers:\n    - x\n',
        'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  annotations:\n    config.kubernetes.io/path: x.yaml\n',
        'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  annotations:\n    internal.config.kubernetes.io/path: x.yaml\n    internal.config.kubernetes.io/index: "7"\n',
      ].join('---\n')
      const want = scratch.path('kpt-out')
      expect(kpt(['fn', 'sink', want], {input}).status).to.equal(0)
      const got = scratch.path('fnr-out')
      await sinkToDirectory(input, got)
      expect(readTree(got)).to.deep.equal(readTree(want))
    })

    it('writes items without annotations to default paths like kpt', async () => {
      const input = RL(
        [
          '- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: cfg\n    namespace: old\n',
          '- apiVersion: apps/v1\n  kind: Deployment\n  metadata:\n    name: web\n',
          '- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: j\n    annotations:\n      internal.config.kubernetes.io/path: out.json\n  data:\n    n: "5"\n    s: <b>&\n',
        ].join(''),
      )
      const want = scratch.path('kpt-out')
      expect(kpt(['fn', 'sink', want], {input}).status).to.equal(0)
      const got = scratch.path('fnr-out')
      const report = await sinkToDirectory(input, got)
      expect(report.written).to.deep.equal(['deployment_web.yaml', 'old/configmap_cfg.yaml', 'out.json'])
      expect(readTree(got)).to.deep.equal(readTree(want))
    })

    it('refuses an existing directory, even an empty one, with kpt\'s message', async () => {
      const dir = scratch.path('exists')
      mkdirSync(dir)
      const e = await sinkError(RL('[]\n'), dir)
      expect(e.kind).to.equal('InvalidArgument')
      expect(e.message).to.equal(`directory ${JSON.stringify(dir)} already exists, please delete the directory and retry`)
      const r = kpt(['fn', 'sink', dir], {input: RL('[]\n')})
      expect(r.stderr).to.include(e.message)
    })
  })
})
