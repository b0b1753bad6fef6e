import {spawnSync} from 'node:child_process'
import {chmodSync, readFileSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'

import {expect} from 'chai'
import {parse} from 'yaml'

import {
  buildFunctionInput,
  readFunctionConfig,
  readPackage,
  stringifyResourceList,
} from '../../src/lib/resourcelist/index.js'
import {KPT, requireKpt, Scratch} from './helpers.js'

describe('resourcelist functionConfig', () => {
  const scratch = new Scratch()
  after(() => scratch.cleanup())

  describe('readFunctionConfig', () => {
    it('reads one resource keeping comments, annotated like kpt (what kpt sends as functionConfig)', async () => {
      requireKpt()
      const file = join(scratch.root, 'fc.yaml')
      writeFileSync(file, '# fc comment\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: my-fc\ndata:\n  a: "1"\n  list:\n    - x\n')
      const fc = await readFunctionConfig(file)
      expect(fc.commentBefore).to.equal(' fc comment')

      const pkg = scratch.tree({'cm.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\n'})
      const dump = join(scratch.root, 'dump.sh')
      const out = join(scratch.root, 'in.yaml')
      writeFileSync(dump, `#!/bin/sh\ntee ${out}\n`)
      chmodSync(dump, 0o755)
      const r = spawnSync(KPT, ['fn', 'eval', pkg, '--exec', dump, '--fn-config', file], {encoding: 'utf8'})
      expect(r.status, r.stderr).to.equal(0)
      const kptInput = readFileSync(out, 'utf8')
      const ours = buildFunctionInput((await readPackage([pkg])).items, {functionConfig: fc}).text
      expect(parse(ours)).to.deep.equal(parse(kptInput))
      // the functionConfig block is byte-identical
      expect(ours.slice(ours.indexOf('functionConfig:'))).to.equal(kptInput.slice(kptInput.indexOf('functionConfig:')))
      expect(stringifyResourceList([], {functionConfig: fc})).to.include('functionConfig:\n  # fc comment\n  apiVersion: v1\n')
    })
  })
})
