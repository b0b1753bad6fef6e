/**
 * The real catalog functions Porch ships, built from their Go modules, through fnr: `fnr eval
 * --exec` and `--image` (functions/catalog.yaml), `fnr serve`'s exec runtime over gRPC and `fnr
 * test`, each compared with `kpt fn eval --exec` on the same binaries, on the catalog's own examples
 * (../shared/compat/catalog-examples) and on a small generated corpus.
 */
import {expect} from 'chai'
import {cp, mkdir, readdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {execa} from 'execa'
import {parse} from 'yaml'

import {loadExecConfig} from '../../src/lib/config/exec-config.js'
import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {CATALOG, CATALOG_SOURCE_COMMIT, MISSING} from '../../scripts/catalog-peers.mjs'
import {runCli} from '../support/cli.js'
import {forEachLimit} from '../support/concurrency.js'
import {startServeProcess, type ServeProcess} from '../support/serve.js'
import {requireShared} from '../support/shared.js'
import {TempDirs} from '../support/tmp.js'
import {
  argsConfigMap,
  BUILD_TIMEOUT_MS,
  CATALOG_YAML,
  catalogBed,
  configArgs,
  CORPUS_CONFIGS,
  corpusPackages,
  corpusResourceList,
  exampleCases,
  type CatalogBed,
  type ExampleCase,
  EVAL_CHANGES_KPTFILE,
  KPT,
  kptEval,
  PORCH_COMPAT,
  readConfig,
  runBinary,
  stableOutput,
  tree,
  writePackage,
} from './support.js'

const PORCH_TEN = ['apply-setters', 'ensure-name-substring', 'search-replace', 'set-annotations', 'set-image', 'set-labels', 'set-namespace', 'set-project-id', 'starlark', 'upsert-resource']
const CATALOG_PREFIX = 'ghcr.io/kptdev/krm-functions-catalog/'

describe('catalog functions: functions/catalog.yaml', () => {
  it('maps every image Porch v1.5.8 maps (digests included) and the binaryExecutor/goExecutor tags of Porch\'s FunctionConfigs, to the ten functions Porch ships', async () => {
    const ours = await readConfig(CATALOG_YAML)
    expect(ours.map((e) => e.function).sort()).to.deep.equal(PORCH_TEN)
    expect([...CATALOG.map((f) => f.name), ...MISSING.map((f) => f.name)].sort()).to.deep.equal(PORCH_TEN)
    const byName = new Map(ours.map((e) => [e.function, e.images]))
    const porch = await readConfig(path.join(PORCH_COMPAT, 'v1.5.8', 'func_config.yaml'))
    expect(porch).to.have.length(10)
    for (const e of porch) {
      expect(byName.get(e.function), e.function).to.include.members(e.images)
      expect(e.images.some((i) => i.includes('@sha256:')), `${e.function} has a digest`).to.equal(true)
    }
    const docs = (await readFile(path.join(PORCH_COMPAT, 'head', 'porch_23-function-configurations.yaml'), 'utf8')).split(/^---$/m).map((d) => parse(d) as {spec: {image: string; binaryExecutor?: {tags: string[]}; goExecutor?: {tags: string[]}; podExecutor?: {tags: string[]}}})
    let checked = 0
    for (const {spec} of docs) {
      const tags = [...(spec.binaryExecutor?.tags ?? []), ...(spec.goExecutor?.tags ?? [])]
      if (tags.length === 0 || !PORCH_TEN.includes(spec.image)) continue
      for (const t of tags) expect(byName.get(spec.image), `${spec.image}:${t}`).to.include(`${CATALOG_PREFIX}${spec.image}:${t}`)
      checked += tags.length
    }
    expect(checked).to.be.greaterThan(10)
    // Nothing else: no pod-only tags, no fnr names.
    for (const [name, images] of byName) for (const i of images) expect(i.startsWith(`${CATALOG_PREFIX}${name}`), i).to.equal(true)
  })

  it('docker/fnr-catalog.Dockerfile copies each of the ten from the catalog\'s own image at Porch\'s version into Porch\'s layout, with catalog.yaml as the config', async () => {
    const text = await readFile(path.join(path.dirname(CATALOG_YAML), '..', 'docker', 'fnr-catalog.Dockerfile'), 'utf8')
    const wanted = Object.fromEntries([...CATALOG, ...MISSING].map((f) => [f.name, f.wanted]))
    for (const name of PORCH_TEN) {
      expect(text, name).to.match(new RegExp(`^FROM \\$\\{CATALOG\\}/${name}:${wanted[name]!.replaceAll('.', '\\.')} AS ${name}$`, 'm'))
      expect(text, name).to.match(new RegExp(`^COPY --from=${name} +.*/usr/local/bin/function /home/nonroot/functions/${name}$`, 'm'))
    }
    expect(text).to.match(/^COPY .*functions\/catalog\.yaml \/home\/nonroot\/config\.yaml$/m)
    expect(text).to.contain('ARG CATALOG=ghcr.io/kptdev/krm-functions-catalog')
  })
})

describe('catalog functions: the real binaries through fnr and kpt', function () {
  before(() => requireShared('compat/catalog-examples'))
  this.timeout(BUILD_TIMEOUT_MS)
  const temp = new TempDirs()
  let work: string
  let bed: CatalogBed
  let examples: ExampleCase[]

  before(async function () {
    this.timeout(BUILD_TIMEOUT_MS)
    work = await temp.make('fnr-catalog-')
    bed = await catalogBed(work)
    examples = await exampleCases(bed.built)
  })
  after(() => temp.cleanup())

  it('the exec config loads: every Porch v1.5.8 image of a built function resolves to the real binary', async function () {
    this.timeout(60_000)
    const config = await loadExecConfig({configPath: bed.configPath, functionsDir: bed.functionsDir})
    const porch = await readConfig(path.join(PORCH_COMPAT, 'v1.5.8', 'func_config.yaml'))
    let resolved = 0
    for (const e of porch.filter((p) => bed.built.includes(p.function))) {
      for (const image of e.images) {
        expect(config.lookup(image)?.binary, image).to.equal(bed.binary[e.function])
        resolved++
      }
    }
    expect(resolved).to.equal(bed.built.length * 3)
    // Bare names, as Porch's FunctionConfigs' "" prefix allows.
    expect(config.lookup('set-namespace:v0.4.2')?.binary).to.equal(bed.binary['set-namespace'])
  })

  it('says which source answered: each binary\'s Go build info names the module version from the proxy, or the catalog\'s source (set-labels on the SDK\'s new home)', async function () {
    this.timeout(60_000)
    expect(bed.built).to.have.length(10)
    for (const fn of CATALOG) {
      const info = String((await execa('go', ['version', '-m', bed.binary[fn.name]!])).stdout)
      const mod = /^\tmod\t(\S+)\t(\S+)/m.exec(info)
      expect(/^\tpath\t(\S+)$/m.exec(info)?.[1], fn.name).to.equal(fn.module)
      if (fn.source === 'module-proxy') expect([mod?.[1], mod?.[2]], fn.name).to.deep.equal([fn.module, fn.version])
      else expect([mod?.[1], mod?.[2]], fn.name).to.deep.equal([fn.module, '(devel)'])
      expect(info, `${fn.name}: no VCS stamp of fnr's own checkout`).to.not.match(/vcs\.revision/)
      const sdk = /^\tdep\tgithub\.com\/kptdev\/krm-functions-sdk\/go\/fn\t(\S+)/m.exec(info)?.[1]
      if (fn.sdkRewrite) expect(sdk, fn.name).to.equal('v1.0.2')
      if (fn.sdkRewrite) expect(info, fn.name).to.not.contain('GoogleContainerTools/kpt-functions-sdk')
      console.log(`      ${fn.name}: ${fn.source === 'module-proxy' ? `${fn.module}@${fn.version} (module proxy)` : `catalog source at ${CATALOG_SOURCE_COMMIT.slice(0, 8)}${sdk ? `, SDK ${sdk}` : ''}`}`)
    }
  })

  it('covers catalog examples of every built function', () => {
    expect(examples.map((e) => e.fn)).to.include.members(bed.built)
  })

  it('on the catalog examples: fnr eval --exec and --image give the same package as kpt fn eval --exec, and the change the example expects', async function () {
    this.timeout(15 * 60_000)
    // Examples are independent: two at a time, the kpt run, the piped run and both fnr runs of each side by side.
    await forEachLimit(examples, 2, async (ex) => {
      const kptPkg = path.join(work, 'examples', ex.name, 'kpt')
      const fnrExec = path.join(work, 'examples', ex.name, 'fnr-exec')
      const fnrImage = path.join(work, 'examples', ex.name, 'fnr-image')
      const expected = path.join(work, 'examples', ex.name, 'expected')
      for (const d of [kptPkg, fnrExec, fnrImage, expected]) await cp(ex.dir, d, {recursive: true})
      const sunk = path.join(work, 'examples', ex.name, 'sunk')
      const [k, piped, r1, r2] = await Promise.all([
        kptEval(kptPkg, bed.binary[ex.fn]!, ex),
        // kpt fn source | fnr eval --exec | kpt fn sink: the function sees what it sees under kpt.
        execa(KPT, ['fn', 'source', ex.dir], {timeout: 60_000}).then((src) => runCli(['eval', '-', '--exec', bed.binary[ex.fn]!, ...configArgs(ex.dir, ex)], {input: String(src.stdout), timeout: 120_000})),
        runCli(['eval', '--input', fnrExec, '-o', fnrExec, '--exec', bed.binary[ex.fn]!, ...configArgs(fnrExec, ex)], {timeout: 120_000}),
        runCli(['eval', '--input', fnrImage, '-o', fnrImage, '--image', ex.image, '--config', bed.configPath, '--functions', bed.functionsDir, ...configArgs(fnrImage, ex)], {timeout: 120_000}),
      ])
      expect(k.exitCode, `${ex.name}: kpt\n${k.stderr}`).to.equal(0)
      const want = await tree(kptPkg)
      expect(piped.exitCode, `${ex.name}: fnr eval on stdin\n${piped.stderr}`).to.equal(0)
      await execa(KPT, ['fn', 'sink', sunk], {input: piped.stdout, timeout: 60_000})
      const sunkTree = await tree(sunk)
      expect(Object.keys(sunkTree)).to.not.be.empty
      expect(sunkTree, `${ex.name}: kpt fn source | fnr eval | kpt fn sink vs kpt`).to.deep.equal(Object.fromEntries(Object.keys(sunkTree).map((f) => [f, want[f]!])))
      expect(r1.exitCode, `${ex.name}: fnr --exec\n${r1.stderr}`).to.equal(0)
      expect(r2.exitCode, `${ex.name}: fnr --image\n${r2.stderr}`).to.equal(0)
      expect(await tree(fnrExec), `${ex.name}: fnr eval --input DIR --exec vs kpt`).to.deep.equal(want)
      expect(await tree(fnrImage), `${ex.name}: fnr eval --input DIR --image vs kpt`).to.deep.equal(want)

      // The example's own expectation (a render of its one-function pipeline): its diff.patch applied.
      const patch = await readFile(path.join(ex.dir, '.expected', 'diff.patch'), 'utf8')
      await execa('git', ['apply', '--unsafe-paths', `--directory=${path.relative(process.cwd(), expected)}`, '-'], {input: patch})
      const wantPatched = await tree(expected)
      const kptTree = {...want}
      for (const t of [wantPatched, kptTree]) delete t['.expected/diff.patch']
      if (EVAL_CHANGES_KPTFILE.includes(ex.name)) for (const t of [wantPatched, kptTree]) delete t.Kptfile
      expect(kptTree, `${ex.name}: the function's change vs the example's diff.patch`).to.deep.equal(wantPatched)
    })
  })

  it('the ResourceList a function gets from fnr eval --input DIR is kpt fn source\'s, byte for byte, comments on keys included', async function () {
    this.timeout(5 * 60_000)
    const pkg = path.join(work, 'comments')
    const files: Record<string, string> = {
      // A comment on the key's line stays there (kyaml); apply-setters reads setters from it.
      'wide.yaml': 'apiVersion: v1\nkind: MyKind\nmetadata:\n  name: wide\nl1:\n  # above the first item\n  - a\nl2: # on the key\n  - a\n  - b\nl3: # on the key\n  # and above\n  - a\nm1: # on a map key\n  k: v\nm2:\n  # above a map key\n  k: v\nl4:\n  - a\n  # between\n  - b\n',
      'compact.yaml': 'apiVersion: v1\nkind: MyKind\nmetadata:\n  name: compact\nenv: #tight\n- dev\n- stage # trailing\nnested:\n  list: # deeper\n  - x: 1 # one\n    y: [a, b] # flow\n',
    }
    for (const ex of examples) files[`from-${ex.name}.yaml`] = await readFile(path.join(ex.dir, (await readdir(ex.dir)).find((f) => f.endsWith('.yaml') && f !== 'Kptfile' && !f.startsWith('fn-config') && !f.startsWith('setters'))!), 'utf8')
    for (const [rel, text] of Object.entries(files)) {
      await mkdir(path.dirname(path.join(pkg, rel)), {recursive: true})
      await writeFile(path.join(pkg, rel), text)
    }
    const kpt = await execa(KPT, ['fn', 'source', pkg], {timeout: 60_000})
    const fnr = await runCli(['eval', '--input', pkg, '--exec', 'cat'], {timeout: 60_000})
    expect(fnr.exitCode, fnr.stderr).to.equal(0)
    expect(fnr.stdout).to.equal(String(kpt.stdout))
  })

  it('on a generated corpus: fnr eval --exec gives the same package and success or failure as kpt fn eval --exec', async function () {
    this.timeout(15 * 60_000)
    const pkgs = corpusPackages(4)
    const cases = bed.built.flatMap((fn) => CORPUS_CONFIGS[fn]!.flatMap((cfg, ci) => pkgs.map((pkg) => ({fn, cfg, ci, pkg}))))
    let compared = 0
    // Cases are independent: two at a time, kpt and fnr side by side in each.
    await forEachLimit(cases, 2, async ({fn, cfg, ci, pkg}) => {
      const base = path.join(work, 'corpus', fn, String(ci), pkg.name)
      const kptPkg = path.join(base, 'kpt')
      const fnrPkg = path.join(base, 'fnr')
      await writePackage(kptPkg, pkg)
      await writePackage(fnrPkg, pkg)
      const c = {args: cfg.args, configPath: undefined as string | undefined}
      if (cfg.fnConfig) {
        await writeFile(path.join(base, 'fn-config.yaml'), cfg.fnConfig)
        c.configPath = '../fn-config.yaml'
      }
      const [k, r] = await Promise.all([
        kptEval(kptPkg, bed.binary[fn]!, c),
        runCli(['eval', '--input', fnrPkg, '-o', fnrPkg, '--exec', bed.binary[fn]!, ...configArgs(fnrPkg, c)], {timeout: 120_000}),
      ])
      const label = `${fn} / ${cfg.label} / ${pkg.name}`
      expect(r.exitCode === 0, `${label}: fnr exit ${r.exitCode} vs kpt exit ${k.exitCode}\n${r.stderr}\n---\n${k.stderr}`).to.equal(k.exitCode === 0)
      expect(await tree(fnrPkg), label).to.deep.equal(await tree(kptPkg))
      compared++
    })
    expect(compared).to.equal(bed.built.length * 2 * pkgs.length)
  })

  describe('fnr serve (exec runtime) over gRPC', () => {
    let serve: ServeProcess | undefined
    let client: EvaluatorClient | undefined

    before(async () => {
      serve = await startServeProcess([`--config=${bed.configPath}`, `--functions=${bed.functionsDir}`, '--disable-runtimes=pod'])
      client = new EvaluatorClient(`127.0.0.1:${serve.port}`)
    })
    after(async () => {
      client?.close()
      serve?.child.kill('SIGTERM')
      if (serve) await serve.exited
    })

    it('answers every corpus ResourceList under Porch\'s image names with the binary\'s own stdout, byte for byte; a function failure is an error with its message', async function () {
      this.timeout(10 * 60_000)
      const pkgs = corpusPackages(3, 99)
      const porch = await readConfig(path.join(PORCH_COMPAT, 'v1.5.8', 'func_config.yaml'))
      let ok = 0
      let failed = 0
      const cases = bed.built.flatMap((fn) => CORPUS_CONFIGS[fn]!.flatMap((cfg, ci) => pkgs.map((pkg, pi) => ({fn, cfg, ci, pkg, pi}))))
      // Cases are independent: two at a time.
      await forEachLimit(cases, 2, async ({fn, cfg, ci, pkg, pi}) => {
        const images = porch.find((p) => p.function === fn)!.images
        const dir = path.join(work, 'serve', fn, String(ci), pkg.name)
        await writePackage(dir, pkg)
        const input = await corpusResourceList(dir, cfg.fnConfig ?? argsConfigMap(cfg.args))
        const image = images[(ci + pi) % images.length]!
        const [direct, served] = await Promise.all([
          runBinary(bed.binary[fn]!, input),
          client!.evaluateRaw(image, input, {deadline: Date.now() + 120_000}).then((res) => res, (e: Error) => e),
        ])
        const label = `${fn} / ${cfg.label} / ${pkg.name} / ${image}`
        if (direct.exitCode === 0) {
          if (served instanceof Error) throw new Error(`${label}: ${served.message}`)
          expect(stableOutput(served.resourceList).toString(), label).to.equal(stableOutput(direct.stdout).toString())
          expect(Buffer.compare(stableOutput(served.resourceList), stableOutput(direct.stdout)), `${label}: bytes`).to.equal(0)
          ok++
        } else {
          expect(served, label).to.be.instanceOf(Error)
          const firstLine = direct.stderr.split('\n').find((l) => l.trim() !== '') ?? ''
          expect((served as Error).message, label).to.contain(firstLine.trim().slice(0, 60))
          failed++
        }
      })
      expect(ok).to.be.greaterThan(0)
      expect(failed).to.be.greaterThan(0)
    })
  })

  it('fnr test runs the catalog examples as eval cases of the real function (--image through catalog.yaml) and passes', async function () {
    this.timeout(10 * 60_000)
    const root = path.join(work, 'fntest')
    // A render case whose function changes the Kptfile under eval has no eval expectation here.
    const cases = examples.filter((ex) => !EVAL_CHANGES_KPTFILE.includes(ex.name))
    for (const ex of cases) {
      const dir = path.join(root, ex.name)
      await cp(ex.dir, dir, {recursive: true})
      const config = [`image: ${ex.image}`, 'testType: eval']
      if (ex.configPath) config.push(`fnConfig: ../${ex.configPath}`)
      if (ex.args.length > 0) config.push('args:', ...ex.args.map((a) => `  ${a.split('=')[0]}: ${JSON.stringify(a.split('=').slice(1).join('='))}`))
      await writeFile(path.join(dir, '.expected', 'config.yaml'), `${config.join('\n')}\n`)
    }
    const r = await runCli(['test', root, '--config', bed.configPath, '--functions', bed.functionsDir], {timeout: 600_000})
    // ensure-name-substring's examples rename the Kptfile with a rename-only git section, which fnr
    // test once skipped (both failed): applied now as git apply does.
    expect(cases.filter((ex) => ex.name.startsWith('ensure-name-substring-'))).to.have.length(2)
    expect(r.exitCode, r.stdout + r.stderr).to.equal(0)
    expect(cases.length).to.be.greaterThan(10)
    expect(r.stdout, r.stdout).to.contain(`${cases.length} passed, 0 failed`)
    // And a broken expectation fails: the real function's output is what is compared.
    const broken = path.join(root, cases[0]!.name)
    await writeFile(path.join(broken, '.expected', 'diff.patch'), '')
    const bad = await runCli(['test', broken, '--config', bed.configPath, '--functions', bed.functionsDir], {timeout: 120_000})
    expect(bad.exitCode, bad.stdout).to.equal(1)
    expect(bad.stdout).to.contain('0 passed, 1 failed')
  })
})
