/**
 * Invalid Kptfiles through the real kpt (1.0.0-beta.56, `kpt fn render --allow-exec`) and
 * through `fnr render`, side by side, with the same function binary (fnr's set-namespace, run as
 * an `exec:` function by both): both refuse, exit 1, print the same text (fnr adds the field
 * paths go-yaml's lines lack after it, `Field paths:`), run no function and
 * leave the package byte for byte as it was. Then the edge cases kpt accepts, which fnr must
 * accept with the same files and the same function input.
 */
import {expect} from 'chai'
import {execa} from 'execa'
import {mkdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {runCli} from '../support/cli.js'
import {REPO_ROOT} from '../support/serve.js'
import {tree, writeTree} from '../support/package-tree.js'
import {TempDirs, writeExecutable} from '../support/tmp.js'

const KPT = '/usr/bin/kpt'
const SET_NAMESPACE = path.join(REPO_ROOT, 'functions', 'set-namespace')

const HEAD = 'apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg\n'
const CM = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  k: foo\n'
const FC = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fc\ndata:\n  namespace: prod\n'

interface Run {
  exitCode: number
  stderr: string
  tree: Record<string, string>
  dumps: Record<string, string>
}

describe('fnr render refuses the Kptfiles kpt refuses (side by side with kpt fn render)', function () {
  this.timeout(180_000)
  const temp = new TempDirs()
  let dump: string
  let gen: string

  before(async () => {
    try {
      await execa(KPT, ['version'])
    } catch {
      throw new Error(`${KPT} is needed for the render interop tests (it ships with the machine image as google-cloud-cli-kpt)`)
    }
    const fns = await temp.make('fnr-kptfile-fns-')
    // Records its input in $DUMP_DIR (numbered) and passes it through.
    dump = await writeExecutable(path.join(fns, 'dump.sh'), '#!/bin/sh\nn=$(ls "$DUMP_DIR" | wc -l)\nexec tee "$DUMP_DIR/$n.yaml"\n')
    // Adds a ConfigMap whose path annotation is absolute.
    gen = await writeExecutable(
      path.join(fns, 'gen.sh'),
      "#!/bin/sh\nexec sed -e 's|^items:$|items:\\n- apiVersion: v1\\n  kind: ConfigMap\\n  metadata:\\n    name: gen\\n    annotations:\\n      internal.config.kubernetes.io/path: \"/another/file/out.yaml\"\\n  data: {a: b}|'\n",
    )
  })
  after(() => temp.cleanup())

  /** Renders a copy of the package with each tool; the paths of both are shown as ROOT. */
  async function both(files: Record<string, string>): Promise<{kpt: Run; fnr: Run}> {
    const work = await temp.make('fnr-kptfile-')
    const out: Partial<Record<'kpt' | 'fnr', Run>> = {}
    for (const who of ['kpt', 'fnr'] as const) {
      const root = path.join(work, who)
      const pkg = path.join(root, 'pkg')
      const dumps = path.join(root, 'dumps')
      await writeTree(pkg, files)
      await mkdir(dumps)
      const env = {DUMP_DIR: dumps}
      const r = who === 'kpt' ? await execa(KPT, ['fn', 'render', pkg, '--allow-exec'], {reject: false, env, cwd: root, stripFinalNewline: false})
          : await runCli(['render', pkg, '--allow-exec'], {env, cwd: root, stripFinalNewline: false})
      const clean = (text: string): string => text.split(root).join('ROOT').replace(/ in \d+(\.\d+)?(ms|s|m)$/gm, ' in 0s')
      out[who] = {
        exitCode: r.exitCode ?? -1,
        stderr: clean(String(r.stderr)),
        tree: await tree(pkg),
        dumps: Object.fromEntries(Object.entries(await tree(dumps)).map(([k, v]) => [k, clean(v)])),
      }
    }
    return {kpt: out.kpt!, fnr: out.fnr!}
  }

  const fn = (extra: string): string => `${HEAD}pipeline:\n  mutators:\n  - exec: ${SET_NAMESPACE}\n${extra}`

  /** Invalid packages: kpt's stderr, which fnr prints too (then, for go-yaml's errors, their field paths). */
  const INVALID: Array<{name: string; files: Record<string, string>; kpt: string; fieldPaths?: string[]}> = [
    {
      name: 'a map as a configMap value (fnr used to send "[object Object]" and set-namespace wrote it into the files)',
      files: {Kptfile: fn('    configMap:\n      namespace:\n        hello: world\n'), 'cm.yaml': CM},
      kpt: 'Error: Kptfile at "ROOT/pkg" can\'t be read.\n\nDetails:\nyaml: unmarshal errors:\n  line 10: cannot unmarshal !!map into string \n',
      fieldPaths: ['line 10: pipeline.mutators[0].configMap.namespace'],
    },
    {
      name: 'a list as a configMap value',
      files: {Kptfile: fn('    configMap:\n      namespace: prod\n      envs:\n       - dev\n       - staging\n'), 'cm.yaml': CM},
      kpt: 'Error: Kptfile at "ROOT/pkg" can\'t be read.\n\nDetails:\nyaml: unmarshal errors:\n  line 11: cannot unmarshal !!seq into string \n',
      fieldPaths: ['line 11: pipeline.mutators[0].configMap.envs'],
    },
    {
      name: 'an unknown pipeline field (targetResources), an unknown top-level field',
      files: {Kptfile: `${fn('    configMap:\n      namespace: prod\n    targetResources:\n      - kind: Deployment\n')}foo: bar\n`, 'cm.yaml': CM},
      kpt: 'Error: Kptfile at "ROOT/pkg" can\'t be read.\n\nDetails:\nyaml: unmarshal errors:\n  line 10: field targetResources not found in type v1.Function\n  line 12: field foo not found in type v1.KptFile \n',
      fieldPaths: ['line 10: pipeline.mutators[0].targetResources', 'line 12: foo'],
    },
    {
      name: 'a string where configMap must be a map, a map where mutators must be a list',
      files: {Kptfile: `${HEAD}pipeline:\n  mutators: {exec: x}\n  validators:\n  - exec: x\n    configMap: namespace-prod\n`, 'cm.yaml': CM},
      kpt: 'Error: Kptfile at "ROOT/pkg" can\'t be read.\n\nDetails:\nyaml: unmarshal errors:\n  line 6: cannot unmarshal !!map into []v1.Function\n  line 9: cannot unmarshal !!str `namespa...` into map[string]string \n',
      fieldPaths: ['line 6: pipeline.mutators', 'line 9: pipeline.validators[0].configMap'],
    },
    {
      name: 'a repeated key',
      files: {Kptfile: fn(`    exec: ${SET_NAMESPACE}\n`), 'cm.yaml': CM},
      kpt: 'Error: Kptfile at "ROOT/pkg" can\'t be read.\n\nDetails:\nyaml: unmarshal errors:\n  line 8: mapping key "exec" already defined at line 7 \n',
    },
    {
      name: 'a configPath file holding two documents',
      files: {Kptfile: fn('    configPath: fc.yaml\n'), 'fc.yaml': `${FC}---\n${FC.replace('name: fc', 'name: fc2')}`, 'cm.yaml': CM},
      kpt: 'Kptfile is invalid:\nField: `pipeline.mutators[0].configPath`\nValue: "fc.yaml"\nReason: functionConfig "fc.yaml" must not contain more than one config, got 2\n \n',
    },
    {
      name: 'a configPath file that is not a KRM resource',
      files: {Kptfile: fn('    configPath: fc.yaml\n'), 'fc.yaml': 'namespace: prod\n', 'cm.yaml': CM},
      kpt: 'Kptfile is invalid:\nField: `pipeline.mutators[0].configPath`\nValue: "fc.yaml"\nReason: functionConfig "fc.yaml": resource must have `apiVersion`\n \n',
    },
    {
      name: 'a configPath naming no file',
      files: {Kptfile: fn('    configPath: nothere.yaml\n'), 'cm.yaml': CM},
      kpt: 'Kptfile is invalid:\nField: `pipeline.mutators[0].configPath`\nValue: "nothere.yaml"\nReason: functionConfig must exist in the current package\n \n',
    },
    {
      name: 'an absolute configPath',
      files: {Kptfile: fn('    configPath: /etc/hostname\n'), 'cm.yaml': CM},
      kpt: 'Kptfile is invalid:\nField: `pipeline.mutators[0].configPath`\nValue: "/etc/hostname"\nReason: path must be relative\n \n',
    },
    {
      name: 'a configPath outside the package',
      files: {Kptfile: fn('    configPath: some/../../cm.yaml\n'), 'cm.yaml': CM},
      kpt: 'Kptfile is invalid:\nField: `pipeline.mutators[0].configPath`\nValue: "some/../../cm.yaml"\nReason: path must not be outside the package\n \n',
    },
    {
      name: 'both configMap and configPath',
      files: {Kptfile: fn('    configPath: fc.yaml\n    configMap:\n      namespace: prod\n'), 'fc.yaml': FC, 'cm.yaml': CM},
      kpt: 'Kptfile is invalid:\nField: `pipeline.mutators[0]`\nReason: functionConfig must not specify both `configMap` and `configPath` at the same time\n \n',
    },
    {
      name: 'neither image nor exec',
      files: {Kptfile: `${fn('    configMap:\n      namespace: prod\n')}  validators:\n  - configMap:\n      namespace: prod\n`, 'cm.yaml': CM},
      kpt: 'Kptfile is invalid:\nField: `pipeline.validators[0]`\nReason: must specify a functon (`image` or `exec`) to execute\n \n',
    },
    {
      name: 'both image and exec',
      files: {Kptfile: fn('    image: fnr.local/set-namespace:v0.4\n'), 'cm.yaml': CM},
      kpt: 'Kptfile is invalid:\nField: `pipeline.mutators[0]`\nReason: must not specify both `image` and `exec` at the same time\n \n',
    },
    {
      name: 'a bad function name',
      files: {Kptfile: `${HEAD}pipeline:\n  mutators:\n  - image: Set-Namespace:v0.4\n`, 'cm.yaml': CM},
      kpt: 'Kptfile is invalid:\nField: `pipeline.mutators[0].image`\nValue: "Set-Namespace:v0.4"\nReason: function name "Set-Namespace:v0.4" is invalid\n \n',
    },
    {
      name: 'an old Kptfile version',
      files: {Kptfile: HEAD.replace('kpt.dev/v1', 'kpt.dev/v1alpha2'), 'cm.yaml': CM},
      kpt: 'Error: Kptfile at "ROOT/pkg" has an old version ("v1alpha2") of the Kptfile schema.\nPlease run "kpt fn eval <PKG_PATH> -i gcr.io/kpt-fn/fix:v0.2 --include-meta-resources" to upgrade the package and retry. \n',
    },
    {
      name: 'an unknown Kptfile kind',
      files: {Kptfile: HEAD.replace('kind: Kptfile', 'kind: Package'), 'cm.yaml': CM},
      kpt: 'Error: Kptfile at "ROOT/pkg" has an unknown resource type ("kpt.dev/v1, Kind=Package"). \n',
    },
    {
      name: 'an invalid Kptfile in a subpackage (refused before the root\'s functions run)',
      files: {Kptfile: fn('    configMap:\n      namespace: prod\n'), 'cm.yaml': CM, 'db/Kptfile': `${HEAD}pipeline:\n  mutators:\n  - exec: x\n    configMap:\n      namespace: [db]\n`, 'db/cm.yaml': CM},
      kpt: 'Error: Kptfile at "ROOT/pkg/db" can\'t be read.\n\nDetails:\nyaml: unmarshal errors:\n  line 9: cannot unmarshal !!seq into string \n',
      fieldPaths: ['line 9: pipeline.mutators[0].configMap.namespace'],
    },
  ]

  for (const c of INVALID) {
    it(`refuses ${c.name}: exit 1, kpt's text, nothing run, the package unchanged`, async () => {
      const {kpt, fnr} = await both(c.files)
      expect(kpt.exitCode, kpt.stderr).to.equal(1)
      expect(kpt.stderr).to.equal(c.kpt)
      expect(fnr.exitCode, fnr.stderr).to.equal(1)
      // kpt's text line for line; after it, the field paths go-yaml does not give.
      const paths = c.fieldPaths ?? []
      expect(fnr.stderr).to.equal(paths.length === 0 ? kpt.stderr : kpt.stderr.replace(/ \n$/, `\n\nField paths:\n  ${paths.join('\n  ')} \n`))
      expect(kpt.tree).to.deep.equal(c.files)
      expect(fnr.tree).to.deep.equal(c.files)
    })
  }

  it('refuses a Kptfile that is not YAML in kpt\'s form and go-yaml\'s words (a key over several lines, a mapping in a compact one), in the root and in a subpackage', async () => {
    const cases: Array<Record<string, string>> = [
      {Kptfile: 'apiVersion: kpt.dev/v1\nkslsls\n;s;s;s\n', 'cm.yaml': CM},
      // kpt's subpkg-has-invalid-kptfile: a plain value runs on into the next `- image:` item
      {Kptfile: fn('    configMap:\n      namespace: prod\n'), 'cm.yaml': CM, 'db/Kptfile': `${HEAD}pipeline:\n  mutators:\n    - image: x\n  configPath: y.yaml\n    - image: z\n`},
      {Kptfile: `${HEAD}info:\n  description: a: b\n`, 'cm.yaml': CM},
      {Kptfile: `${HEAD}info:\n  description: "a: x": b\n`, 'cm.yaml': CM},
      {Kptfile: `${HEAD}info:\n  description: x\n    y: z\n`, 'cm.yaml': CM},
    ]
    for (const files of cases) {
      const {kpt, fnr} = await both(files)
      const where = 'db/Kptfile' in files ? 'ROOT/pkg/db' : 'ROOT/pkg'
      expect(fnr.stderr, files.Kptfile).to.equal(kpt.stderr)
      for (const r of [kpt, fnr]) {
        expect(r.exitCode, r.stderr).to.equal(1)
        expect(r.stderr).to.match(new RegExp(`^Error: Kptfile at "${where}" can't be read\\.\\n\\nDetails:\\nyaml: line \\d+: .* \\n$`))
        expect(r.tree).to.deep.equal(files)
      }
    }
  })

  it('refuses a configPath file without documents (kpt panics on it, exit 2); fnr says why, exit 1', async () => {
    const files = {Kptfile: fn('    configPath: fc.yaml\n'), 'fc.yaml': '# nothing yet\n', 'cm.yaml': CM}
    const {kpt, fnr} = await both(files)
    expect(kpt.exitCode).to.equal(2)
    expect(kpt.stderr).to.contain('panic: runtime error: index out of range [0] with length 0')
    expect(fnr.exitCode).to.equal(1)
    expect(fnr.stderr).to.equal('Kptfile is invalid:\nField: `pipeline.mutators[0].configPath`\nValue: "fc.yaml"\nReason: functionConfig "fc.yaml" must contain one config, got 0\n \n')
    expect(fnr.tree).to.deep.equal(files)
  })

  /** A package kpt renders: fnr must render it with the same files, console and function input. */
  async function same(files: Record<string, string>, normalize: (dump: string) => string = (d) => d): Promise<{kpt: Run; fnr: Run}> {
    const r = await both(files)
    expect(r.kpt.exitCode, r.kpt.stderr).to.equal(0)
    expect(r.fnr.exitCode, r.fnr.stderr).to.equal(0)
    expect(r.fnr.tree).to.deep.equal(r.kpt.tree)
    expect(r.fnr.stderr).to.equal(r.kpt.stderr)
    const norm = (d: Record<string, string>) => Object.fromEntries(Object.entries(d).map(([k, v]) => [k, normalize(v)]))
    expect(norm(r.fnr.dumps)).to.deep.equal(norm(r.kpt.dumps))
    return r
  }

  /** kpt orders a configMap's keys as Go's map iteration does (randomly): compare them sorted. */
  const sortedData = (text: string): string => text.replace(/^( *data: )\{(.*)\}$/m, (_m, head: string, body: string) => `${head}{${body.split(', ').sort().join(', ')}}`)

  it('accepts scalar configMap values of any type and sends their source text, as kpt does', async () => {
    const {kpt} = await same({Kptfile: `${HEAD}pipeline:\n  mutators:\n  - exec: ${dump}\n    configMap:\n      n: 3\n      b: true\n      f: 1.50\n      h: 0x1F\n      z:\n      t: ~\n      q: "quoted"\n      y: yes\n      5: five\n`, 'cm.yaml': CM}, sortedData)
    expect(kpt.dumps['0.yaml']).to.match(/data: \{.*\}/)
    for (const kv of ['n: "3"', 'b: "true"', 'f: "1.50"', 'h: "0x1F"', 'z: ""', 't: ""', 'q: quoted', 'y: yes', '5: five']) expect(kpt.dumps['0.yaml']).to.contain(kv)
    // set-namespace with a number: the namespace is the text "3".
    const ns = await same({Kptfile: fn('    configMap:\n      namespace: 3\n'), 'cm.yaml': CM})
    expect(ns.fnr.tree['cm.yaml']).to.contain('namespace: "3"')
  })

  it('accepts `configMap: {}` (no functionConfig is sent), null sections, every Kptfile field kpt knows; configPath sends what kpt sends', async () => {
    const {fnr} = await same({
      Kptfile: `${HEAD}  namespace: ns\n  labels: {a: b}\nupstream:\n  type: git\n  git: {repo: r, directory: d, ref: x}\n  updateStrategy: resource-merge\nupstreamLock:\n  type: git\n  git: {repo: r, directory: d, ref: x, commit: abc}\ninfo:\n  site: s\n  emails: [a@b]\n  license: MIT\n  description: d\n  keywords: [k]\n  readinessGates: [{conditionType: c}]\ninventory: {namespace: n, name: x, inventoryID: i}\nstatus:\n  conditions: [{type: t, status: "True", reason: r, message: m}]\npipeline:\n  mutators:\n  - exec: ${dump}\n    name: first\n    configMap: {}\n    selectors:\n  - exec: ${dump}\n    configPath: ./fc.yaml\n    configMap: {}\n  - exec: ${dump}\n    configPath: fc.yaml\n  validators:\n  - exec: ${dump}\n    configPath: fc.yaml\n    selectors: [{kind: ConfigMap}]\n`,
      'fc.yaml': FC,
      'cm.yaml': CM,
    })
    expect(fnr.dumps['0.yaml']).not.to.contain('functionConfig')
    // configPath: ./fc.yaml names the file, not the resource: the file as it is on disk (kpt);
    // fc.yaml: the package's resource; a validator: the file again, and no ids on the items.
    const onDisk = `\nfunctionConfig:\n${FC.replace(/^/gm, '  ').trimEnd()}\n`
    expect(fnr.dumps['1.yaml']).to.contain(onDisk)
    expect(fnr.dumps['2.yaml']).not.to.contain(onDisk)
    expect(fnr.dumps['2.yaml'].slice(fnr.dumps['2.yaml'].indexOf('\nfunctionConfig:'))).to.contain("\n      internal.config.kubernetes.io/path: 'fc.yaml'\n")
    expect(fnr.dumps['3.yaml']).to.contain(onDisk)
    expect(fnr.dumps['3.yaml']).not.to.contain('annotations-migration-resource-id')
    expect(fnr.dumps['3.yaml']).not.to.contain('kpt-resource-id')
  })

  it('a function\'s absolute path annotation lands inside the package (kpt beta.56), in the root and in a subpackage', async () => {
    const sub = `${HEAD.replace('name: pkg', 'name: sub')}pipeline:\n  mutators:\n  - exec: ${gen}\n`
    const {fnr} = await same({Kptfile: `${HEAD}pipeline:\n  mutators:\n  - exec: ${gen}\n`, 'cm.yaml': CM, 'sub/Kptfile': sub})
    expect(fnr.tree).to.have.keys(['Kptfile', 'cm.yaml', 'another/file/out.yaml', 'sub/Kptfile', 'sub/another/file/out.yaml'])
  })

  it('an image function\'s stderr loses its final newline as kpt reads it from the container runtime (an exec function\'s keeps it, as in kpt)', async () => {
    const dir = await temp.make('fnr-kptfile-image-')
    const fns = path.join(dir, 'fns')
    await mkdir(fns)
    const chatty = await writeExecutable(path.join(fns, 'chatty'), '#!/bin/sh\necho one >&2\necho two >&2\nexec cat\n')
    await writeFile(path.join(fns, 'config.yaml'), 'functions:\n  - function: chatty\n    images:\n      - example.com/chatty:v1\n')
    const files = (first: string) => ({Kptfile: `${HEAD}pipeline:\n  mutators:\n  - ${first}\n  - exec: ${chatty}\n`, 'cm.yaml': CM})
    await writeTree(path.join(dir, 'kpt', 'pkg'), files(`exec: ${chatty}`))
    await writeTree(path.join(dir, 'fnr', 'pkg'), files('image: example.com/chatty:v1'))
    const args = ['pkg', '--allow-exec', '--results-dir', 'res']
    const k = await execa(KPT, ['fn', 'render', ...args], {reject: false, cwd: path.join(dir, 'kpt')})
    const f = await runCli(['render', ...args, '--config', path.join(fns, 'config.yaml'), '--functions', fns], {cwd: path.join(dir, 'fnr')})
    expect(k.exitCode, String(k.stderr)).to.equal(0)
    expect(f.exitCode, f.stderr).to.equal(0)
    const durations = (text: string) => text.replace(/ in \S+$/gm, ' in 0s')
    // kpt ran the function as exec both times: fnr's image run of it has no "" line.
    const asImage = (text: string) => text.replace(`"${chatty}"`, '"example.com/chatty:v1"').replace(`"${chatty}"`, '"example.com/chatty:v1"').replace('    "two"\n    ""\n', '    "two"\n')
    expect(durations(f.stderr)).to.equal(asImage(durations(String(k.stderr))))
    const results = await readFile(path.join(dir, 'fnr', 'res', 'results.yaml'), 'utf8')
    expect(results).to.equal((await readFile(path.join(dir, 'kpt', 'res', 'results.yaml'), 'utf8')).replace(`- exec: ${chatty}\n    stderr: |\n`, '- image: example.com/chatty:v1\n    stderr: |-\n'))
    expect(results).to.contain('stderr: |-\n      one\n      two\n')
  })
})
