/**
 * The dependency rules of src/ (.dependency-cruiser.mjs; docs/architecture.md, "Layers"): no
 * circles, no import into a higher layer, src/lib and src/bin without oclif or the CLI, the pure
 * pod model. `npm run lint` runs them with depcruise; this spec runs the same rule file through
 * dependency-cruiser's API, in process: on the real tree, and on a copy with one bad import of
 * each kind planted, to show that every rule catches what it is for.
 */
import {cp, mkdtemp, readFile, rm, symlink, writeFile} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'

import {expect} from 'chai'
import {cruise, type ICruiseOptions, type ICruiseResult} from 'dependency-cruiser'
import extractDepcruiseOptions from 'dependency-cruiser/config-utl/extract-depcruise-options'
import extractTSConfig from 'dependency-cruiser/config-utl/extract-ts-config'

import {REPO_ROOT} from '../support/serve.js'

const RULES = path.join(REPO_ROOT, '.dependency-cruiser.mjs')

async function cruiseTree(root: string, files: string[], extra: Partial<ICruiseOptions> = {}): Promise<ICruiseResult> {
  const options = await extractDepcruiseOptions(RULES)
  const result = await cruise(files, {...options, ...extra, baseDir: root, validate: true, outputType: 'json'}, {}, {tsConfig: extractTSConfig(path.join(root, 'tsconfig.json'))})
  return (typeof result.output === 'string' ? JSON.parse(result.output) : result.output) as ICruiseResult
}

const brief = (r: ICruiseResult): string[] => r.summary.violations.map((v) => `${v.rule.name}: ${v.from} -> ${v.to}`)

describe('layering: the dependency rules of src/ (.dependency-cruiser.mjs)', function () {
  this.timeout(120_000)

  it('src/ keeps them: no circle, no upward import, no oclif in src/lib or src/bin, a pure pod model', async () => {
    const r = await cruiseTree(REPO_ROOT, ['src'])
    expect(r.summary.totalCruised).to.be.greaterThan(150)
    const sources = r.modules.map((m) => m.source)
    expect(sources).to.include.members(['src/lib/errors.ts', 'src/lib/grpc/server.ts', 'src/lib/pods/model/gc.ts', 'src/commands/serve.ts', 'src/bin/wrapper-server.ts'])
    expect(brief(r)).to.deep.equal([])
  })

  describe('a copy of src/ with one bad import of each kind', () => {
    let dir: string
    before(async () => {
      dir = await mkdtemp(path.join(os.tmpdir(), 'fnr-layering-'))
      await cp(path.join(REPO_ROOT, 'src'), path.join(dir, 'src'), {recursive: true})
      await cp(path.join(REPO_ROOT, 'tsconfig.json'), path.join(dir, 'tsconfig.json'))
      await symlink(path.join(REPO_ROOT, 'node_modules'), path.join(dir, 'node_modules'))
    })
    after(async () => {
      if (dir) await rm(dir, {recursive: true, force: true})
    })

    /** Each planted import and the violation it must cause. */
    const PLANTS: Array<{file: string; line: string; rule: string; to: string}> = [
      // the process runner learning the gRPC reply's layout again
      {file: 'src/lib/process/run.ts', line: "import {REPLY_HEADROOM} from '../grpc/reply.js'", rule: 'no-upward-from-process', to: 'src/lib/grpc/reply.ts'},
      // a type names its module too
      {file: 'src/lib/grpc/server.ts', line: "import type {MultiEvaluator} from '../evaluators/multi.js'", rule: 'no-upward-from-grpc', to: 'src/lib/evaluators/multi.ts'},
      {file: 'src/lib/k8s/client.ts', line: "import '../config/canonical-json.js'", rule: 'no-upward-from-clients', to: 'src/lib/config/canonical-json.ts'},
      // the pod cache's old type-only circle
      {file: 'src/lib/pods/runtime/claim.ts', line: "import type {PodCache} from './cache.js'", rule: 'no-circular', to: 'src/lib/pods/runtime/cache.ts'},
      {file: 'src/lib/eval.ts', line: "import {Command} from '@oclif/core'", rule: 'lib-without-oclif', to: '@oclif/core'},
      // telemetry is below the model, but the model stays pure
      {file: 'src/lib/pods/model/naming.ts', line: "import {metrics} from '../../telemetry/metrics.js'", rule: 'pure-pod-model', to: 'src/lib/telemetry/metrics.ts'},
      // a new top-level module nobody placed in a layer
      {file: 'src/lib/stray.ts', line: "import {FnrError} from './errors.js'", rule: 'in-a-layer', to: 'src/lib/errors.ts'},
    ]

    it('each rule catches its bad import, and nothing else is reported', async () => {
      for (const plant of PLANTS) {
        const file = path.join(dir, plant.file)
        const text = await readFile(file, 'utf8').catch(() => '')
        await writeFile(file, `${text}\n${plant.line}\n`)
      }
      const r = await cruiseTree(dir, ['src'])
      const found = r.summary.violations
      // a circle is reported once, from either of its ends
      const matches = (v: (typeof found)[number], p: (typeof PLANTS)[number]): boolean =>
        v.rule.name === p.rule && ((v.from === p.file && v.to.includes(p.to)) || (p.rule === 'no-circular' && v.from === p.to && v.to === p.file))
      for (const plant of PLANTS) {
        expect(found.some((v) => matches(v, plant)), `${plant.rule} for ${plant.file} -> ${plant.to}; reported: ${brief(r).join('; ')}`).to.equal(true)
      }
      // and every report is one of the planted imports
      expect(found.filter((v) => !PLANTS.some((p) => matches(v, p))).map((v) => `${v.rule.name}: ${v.from} -> ${v.to}`)).to.deep.equal([])
    })
  })
})
