/**
 * fnr render against the real kpt (1.0.0-beta.56, `kpt fn render --allow-exec`) on packages
 * written here, with exec functions: the same files, the same results.yaml, the same console
 * output (durations aside) and the same function input (package paths aside), byte for byte.
 */
import {expect} from 'chai'
import {execa} from 'execa'
import {mkdir} from 'node:fs/promises'
import path from 'node:path'

import type {RunningServer} from '../../src/lib/serve.js'
import {runCli} from '../support/cli.js'
import {REPO_ROOT, serveOptions, startInProcess} from '../support/serve.js'
import {tree, writeTree} from '../support/package-tree.js'
import {TempDirs, writeExecutable} from '../support/tmp.js'

const KPT = '/usr/bin/kpt'

const sanitize = (text: string, root: string): string => text.split(root).join('ROOT').replace(/ in \d+(\.\d+)?(ms|s|m)$/gm, ' in 0s')

describe('fnr render (byte for byte against kpt fn render)', function () {
  this.timeout(120_000)
  const temp = new TempDirs()
  let fns: string
  const FN: Record<string, string> = {}

  before(async () => {
    try {
      await execa(KPT, ['version'])
    } catch {
      throw new Error(`${KPT} is needed for the render interop tests (it ships with the machine image as google-cloud-cli-kpt)`)
    }
    fns = await temp.make('fnr-render-fns-')
    // Records its input in $DUMP_DIR (numbered), says so on stderr, passes the input through.
    FN.dump = await writeExecutable(path.join(fns, 'dump.sh'), '#!/bin/sh\nn=$(ls "$DUMP_DIR" | wc -l)\ntee "$DUMP_DIR/$n.yaml"\necho "dump $n" >&2\n')
    FN.foobar = await writeExecutable(path.join(fns, 'foobar.sh'), "#!/bin/sh\nexec sed -e 's/foo/bar/'\n")
    FN.validator = await writeExecutable(
      path.join(fns, 'validate.sh'),
      "#!/bin/sh\ncat >/dev/null\nprintf 'apiVersion: config.kubernetes.io/v1\\nkind: ResourceList\\nitems: []\\nresults:\\n- message: looks fine\\n  severity: info\\n- message: replicas too high\\n  severity: warning\\n  resourceRef: {apiVersion: v1, kind: ConfigMap, name: cm}\\n  field: {path: data.k}\\n'\n",
    )
    FN.label = await writeExecutable(
      path.join(fns, 'label.js'),
      `#!/usr/bin/env node
// Sets data.k to the functionConfig's data.team on every item, and adds a new ConfigMap.
let s = require('fs').readFileSync(0, 'utf8')
const team = /\\n  data: \\{team: ([^}]*)\\}/.exec(s)?.[1] ?? /\\n    team: (.*)/.exec(s.slice(s.indexOf('\\nfunctionConfig:')))?.[1] ?? 'none'
s = s.replace(/k: foo/g, 'k: ' + team)
s = s.replace('\\nitems:\\n', '\\nitems:\\n- apiVersion: v1\\n  kind: ConfigMap\\n  metadata:\\n    name: generated-' + team + '\\n  data:\\n    made: by-label\\n')
process.stdout.write(s.slice(0, s.indexOf('\\nfunctionConfig:') + 1))
`,
    )
    FN.changeMe = await writeExecutable(path.join(fns, 'change-me.sh'), "#!/bin/sh\nexec sed -e 's/change-me/changed/'\n")
    // Gives the items back in reverse order, each one's text untouched.
    FN.reverse = await writeExecutable(
      path.join(fns, 'reverse.js'),
      `#!/usr/bin/env node
const s = require('fs').readFileSync(0, 'utf8')
const at = s.indexOf('\\nitems:\\n') + 8
const rest = s.slice(at)
let end = rest.search(/^[a-zA-Z]/m)
if (end < 0) end = rest.length
const blocks = rest.slice(0, end).split(/^(?=- )/m).filter(Boolean)
process.stdout.write(s.slice(0, at) + blocks.reverse().join('') + rest.slice(end))
`,
    )
    FN.fail = await writeExecutable(path.join(fns, 'fail.sh'), '#!/bin/sh\ncat >/dev/null\nfor i in 1 2 3 4 5 6; do echo "it broke $i" >&2; done\nexit 3\n')
    FN.empty = await writeExecutable(path.join(fns, 'empty.sh'), '#!/bin/sh\ncat >/dev/null\n')
  })
  after(() => temp.cleanup())

  const CM = (name: string, extra = ''): string => `${extra}apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${name}\ndata:\n  k: foo\n`
  const kptfile = (name: string, pipeline = ''): string => `apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: ${name}\n${pipeline}`

  /** Renders copies of the package with kpt and with fnr and compares everything. */
  async function compare(files: Record<string, string>, extraArgs: string[] = []): Promise<{kpt: {exitCode: number; stderr: string}; fnr: {exitCode: number; stderr: string}; after: Record<string, string>}> {
    const work = await temp.make('fnr-render-')
    const out: Record<string, {exitCode: number; stderr: string; tree: Record<string, string>; results: string; dumps: Record<string, string>}> = {}
    for (const who of ['kpt', 'fnr'] as const) {
      const root = path.join(work, who)
      const pkg = path.join(root, 'pkg')
      const dumps = path.join(root, 'dumps')
      await writeTree(pkg, files)
      await mkdir(dumps)
      const args = ['fn', 'render', pkg, '--allow-exec', '--results-dir', path.join(root, 'res'), ...extraArgs]
      const env = {DUMP_DIR: dumps}
      const r =
        who === 'kpt'
          ? await execa(KPT, args, {reject: false, env, cwd: root})
          : await runCli(['render', pkg, '--allow-exec', '--results-dir', path.join(root, 'res'), ...extraArgs], {env, cwd: root})
      const stderr = String(r.stderr)
      out[who] = {
        exitCode: r.exitCode ?? -1,
        stderr: sanitize(stderr, root),
        tree: await tree(pkg),
        results: sanitize((await tree(path.join(root, 'res')))['results.yaml'] ?? '', root),
        dumps: Object.fromEntries(Object.entries(await tree(dumps)).map(([k, v]) => [k, sanitize(v, root)])),
      }
    }
    const kpt = out.kpt!
    const fnr = out.fnr!
    expect(fnr.exitCode, fnr.stderr).to.equal(kpt.exitCode)
    expect(fnr.tree).to.deep.equal(kpt.tree)
    expect(fnr.results).to.equal(kpt.results)
    expect(fnr.dumps).to.deep.equal(kpt.dumps)
    // Everything but kpt's "Error: ..." line (its wording is the error's own) is kpt's.
    expect(fnr.stderr.replace(/^Error: .*\n?/m, '').trimEnd()).to.equal(kpt.stderr.replace(/^Error: .*\n?/m, '').trimEnd())
    return {kpt, fnr, after: fnr.tree}
  }

  it('nested subpackages in kpt\'s order, mutators then validators, results and console like kpt', async () => {
    const pipeline = `pipeline:\n  mutators:\n    - exec: ${FN.dump}\n      configMap:\n        team: web\n    - exec: ${FN.foobar}\n  validators:\n    - exec: ${FN.validator}\n`
    const {kpt, after} = await compare({
      Kptfile: kptfile('pkg', pipeline),
      'cm.yaml': CM('cm', '# the root config\n'),
      'sub/Kptfile': kptfile('sub', `pipeline:\n  mutators:\n  - exec: ${FN.dump}\n`),
      'sub/cm.yaml': CM('cm'),
      'sub/deeper/x.yaml': `${CM('x')}---\n${CM('y')}`,
      'asub/Kptfile': kptfile('asub'),
      'sub/subsub/Kptfile': kptfile('subsub', `pipeline:\n  mutators:\n    - exec: ${FN.foobar}\n`),
      'sub/subsub/list.yaml': `apiVersion: v1\nkind: List\nmetadata:\n  name: l\nitems:\n  - a\n  - b\n`,
    })
    expect(kpt.exitCode).to.equal(0)
    expect(kpt.stderr).to.contain('Successfully executed 5 function(s) in 4 package(s).')
    expect(after['sub/cm.yaml']).to.contain('k: bar')
  })

  it('configMap and configPath functionConfigs, and resources a function adds (default paths in the right package)', async () => {
    await compare({
      Kptfile: kptfile('pkg', `pipeline:\n  mutators:\n    - exec: ${FN.label}\n      configPath: fc.yaml\n    - exec: ${FN.dump}\n      configPath: fc.yaml\n`),
      'fc.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fc\n  annotations:\n    config.kubernetes.io/local-config: "true"\ndata:\n  team: payments\n',
      'cm.yaml': CM('cm'),
      'child/Kptfile': kptfile('child', `pipeline:\n  mutators:\n    - exec: ${FN.label}\n      configMap:\n        team: child-team\n`),
      'child/cm.yaml': CM('child-cm'),
    })
  })

  it('selectors and exclude send only the matching resources and merge the output back', async () => {
    await compare({
      Kptfile: kptfile(
        'pkg',
        `pipeline:\n  mutators:\n    - exec: ${FN.foobar}\n      selectors:\n        - kind: ConfigMap\n          name: a\n        - name: c\n    - exec: ${FN.dump}\n      selectors:\n        - kind: ConfigMap\n      exclude:\n        - name: b\n`,
      ),
      'a.yaml': CM('a'),
      'b.yaml': CM('b'),
      'c.yaml': CM('c'),
    })
  })

  it('functions that give most resources back unchanged (fnr keeps those nodes instead of parsing them again): kpt\'s files, untouched files byte for byte', async () => {
    const commented = '# the head comment\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: commented # on the name\n  annotations: # over a map\n    note: "quoted"\ndata:\n  hex: 0x1F\n  single: \'kept\'\n  block: |\n    one\n\n    three\n'
    const files = {
      Kptfile: kptfile('pkg', `pipeline:\n  mutators:\n    - exec: ${FN.dump}\n    - exec: ${FN.reverse}\n    - exec: ${FN.changeMe}\n    - exec: ${FN.reverse}\n  validators:\n    - exec: ${FN.dump}\n`),
      'commented.yaml': commented,
      'many.yaml': [CM('m1', '# first\n'), CM('m2'), `${CM('m3')}  marker: change-me\n`, CM('m4')].join('---\n'),
      'wide.yaml': 'apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  template:\n    spec:\n      containers:\n        - name: main\n          args:\n            - --x\n',
      'anchors.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: anchored\ndata:\n  a: &x shared\n  b: *x\n',
      'sub/Kptfile': kptfile('sub', `pipeline:\n  mutators:\n    - exec: ${FN.changeMe}\n      selectors:\n        - name: s2\n`),
      'sub/cms.yaml': [CM('s1'), `${CM('s2')}  marker: change-me\n`, CM('s3', '# third\n')].join('---\n'),
    }
    const {kpt, after} = await compare(files)
    expect(kpt.exitCode).to.equal(0)
    expect(after['commented.yaml']).to.equal(commented)
    expect(after['many.yaml']).to.contain('marker: changed').and.to.contain('# first')
    expect(after['sub/cms.yaml']).to.contain('marker: changed').and.to.contain('# third')
  })

  it('a failing function: [FAIL], stderr, exit code, results.yaml like kpt, and nothing written', async () => {
    const files = {
      Kptfile: kptfile('pkg', `pipeline:\n  mutators:\n    - exec: ${FN.foobar}\n    - exec: ${FN.fail}\n`),
      'cm.yaml': CM('cm'),
    }
    const {kpt, fnr, after} = await compare(files)
    expect(kpt.exitCode).to.equal(1)
    expect(fnr.stderr).to.contain('Exit code: 3')
    expect(after['cm.yaml']).to.equal(CM('cm'))
  })

  it('a failing function in a subpackage stops the render (nothing written anywhere)', async () => {
    const {after} = await compare({
      Kptfile: kptfile('pkg', `pipeline:\n  mutators:\n    - exec: ${FN.foobar}\n`),
      'cm.yaml': CM('cm'),
      'sub/Kptfile': kptfile('sub', `pipeline:\n  validators:\n    - exec: ${FN.fail}\n`),
      'sub/cm.yaml': CM('cm'),
    })
    expect(after['cm.yaml']).to.equal(CM('cm'))
  })

  it('exec functions need --allow-exec (kpt\'s message); an empty output fails instead of deleting the package', async () => {
    const dir = await temp.make('fnr-render-flags-')
    await writeTree(dir, {Kptfile: kptfile('pkg', `pipeline:\n  mutators:\n    - exec: ${FN.empty}\n`), 'cm.yaml': CM('cm')})
    const k = await execa(KPT, ['fn', 'render', dir], {reject: false})
    const r = await runCli(['render', dir])
    expect(r.exitCode).to.equal(1)
    // kpt's line, word for word.
    expect(r.stderr.split('\n')).to.include('Error: must run with `--allow-exec` option to allow running function binaries ')
    expect(String(k.stderr).split('\n')).to.include('Error: must run with `--allow-exec` option to allow running function binaries ')
    expect(String(k.stderr)).to.contain('must run with `--allow-exec` option to allow running function binaries')
    expect(r.stderr).to.contain('must run with `--allow-exec` option to allow running function binaries')
    const e = await runCli(['render', dir, '--allow-exec'])
    expect(e.exitCode).to.equal(1)
    expect(e.stderr).to.contain('exited 0 but wrote nothing to stdout')
    expect(await tree(dir)).to.have.keys(['Kptfile', 'cm.yaml'])
  })

  it('runs image functions through the shipped exec config, and writes -o DIR / -o stdout', async () => {
    const dir = await temp.make('fnr-render-image-')
    const pkg = path.join(dir, 'pkg')
    await writeTree(pkg, {
      Kptfile: kptfile('pkg', 'pipeline:\n  mutators:\n    - image: fnr.local/set-namespace:v0.4\n      configMap:\n        namespace: prod\n'),
      'cm.yaml': CM('cm'),
    })
    const out = path.join(dir, 'out')
    const r = await runCli(['render', pkg, '-o', out])
    expect(r.exitCode, r.stderr).to.equal(0)
    expect((await tree(out))['cm.yaml']).to.contain('namespace: prod')
    expect((await tree(pkg))['cm.yaml']).to.equal(CM('cm'))
    const s = await runCli(['render', pkg, '-o', 'stdout'])
    expect(s.exitCode, s.stderr).to.equal(0)
    expect(s.stdout).to.contain('kind: ResourceList').and.to.contain('namespace: prod')
    const missing = await runCli(['render', path.join(dir, 'nope')])
    expect(missing.exitCode).to.equal(1)
  })

  it('gives the same results through oclif as through the fast path (files, stdout, stderr, exit code)', async () => {
    const dir = await temp.make('fnr-render-paths-')
    const pkg = {
      Kptfile: kptfile('pkg', `pipeline:\n  mutators:\n    - image: fnr.local/set-namespace:v0.4\n      configMap:\n        namespace: prod\n    - exec: ${FN.foobar}\n`),
      'cm.yaml': CM('foo'),
    }
    const cases = [
      ['PKG', '--allow-exec'],
      ['PKG', '--allow-exec', '-o', 'stdout', '--no-truncate-output', '--timeout', '1m'],
      ['PKG', '--allow-exec', '-o', 'unwrap', 'ignored-extra-argument'],
      ['PKG', '--allow-exec', '--results-dir', 'RESULTS', '--image-pull-policy', 'never', '--allow-network'],
      ['PKG'],
      ['PKG', '--allow-exec', '--timeout', 'soon'],
      ['PKG', '--allow-exec', '--max-output-size', '12'],
      ['PKG', '--allow-exec', '--exit-codes', 'fnr', '--bogus'],
      ['PKG', '--runner-ca-file', 'ca.pem'],
      [path.join(dir, 'nope')],
    ]
    for (const [i, args] of cases.entries()) {
      const outcome: Array<Record<string, unknown>> = []
      for (const env of [{}, {FNR_NO_FAST_PATH: '1'}]) {
        const root = path.join(dir, `${i}-${outcome.length}`)
        await writeTree(path.join(root, 'pkg'), pkg)
        const argv = args.map((a) => (a === 'PKG' ? path.join(root, 'pkg') : a === 'RESULTS' ? path.join(root, 'results') : a))
        const r = await runCli(['render', ...argv], {env})
        const clean = (text: string): string => sanitize(text, root)
        outcome.push({exitCode: r.exitCode, stdout: clean(r.stdout), stderr: clean(r.stderr), files: await tree(root)})
      }
      expect(outcome[0], args.join(' ')).to.deep.equal(outcome[1])
    }
  })

  it('--runner renders image functions through a running fnr serve, with the same files as the local exec config', async () => {
    let running: RunningServer | undefined
    try {
      running = await startInProcess(serveOptions({configPath: path.join(REPO_ROOT, 'functions', 'config.yaml'), functionsDir: path.join(REPO_ROOT, 'functions'), disableRuntimes: 'pod'}))
      const dir = await temp.make('fnr-render-runner-')
      const files = {
        Kptfile: kptfile('pkg', 'pipeline:\n  mutators:\n    - image: fnr.local/set-namespace:v0.4\n      configMap:\n        namespace: staging\n'),
        'cm.yaml': CM('cm'),
        'sub/Kptfile': kptfile('sub', 'pipeline:\n  mutators:\n    - image: fnr.local/set-labels:v0.2\n      configMap:\n        app: web\n'),
        'sub/cm.yaml': CM('sub-cm'),
      }
      await writeTree(path.join(dir, 'remote', 'pkg'), files)
      await writeTree(path.join(dir, 'local', 'pkg'), files)
      const r = await runCli(['render', path.join(dir, 'remote', 'pkg'), '--runner', `127.0.0.1:${running.port}`, '--results-dir', path.join(dir, 'remote', 'res')])
      expect(r.exitCode, r.stderr).to.equal(0)
      const l = await runCli(['render', path.join(dir, 'local', 'pkg'), '--results-dir', path.join(dir, 'local', 'res')])
      expect(l.exitCode, l.stderr).to.equal(0)
      const remote = await tree(path.join(dir, 'remote'))
      expect(remote).to.deep.equal(await tree(path.join(dir, 'local')))
      expect(remote['pkg/sub/cm.yaml']).to.contain('namespace: staging').and.to.contain('app: web')
      expect(r.stderr.replace(/ in \S+$/gm, '')).to.equal(l.stderr.replace(/ in \S+$/gm, '').split(path.join(dir, 'local')).join(path.join(dir, 'remote')))
      const unknown = await runCli(['render', path.join(dir, 'remote', 'pkg'), '--runner', 'nope'])
      expect(unknown.exitCode).to.equal(1)
    } finally {
      await running?.stop()
    }
  })
})
