/**
 * A function's stdin, stdout and stderr are pipes, as kpt (Go's os/exec) gives them: shell
 * functions that read `/dev/stdin`, write `> /dev/stdout` or `> /dev/stderr`, or test `[ -p
 * /dev/stdin ]` work under `fnr eval --exec` and `fnr render` as under kpt 1.0.0-beta.56, run side
 * by side on copies of one package: the same exit, stdout byte for byte, the same files. Before
 * 2026-12-01 fnr gave them socketpairs (Node's spawn), which those names cannot open (ENXIO): the
 * script failed under fnr and passed under kpt. With FNR_SPAWNER=off (no native helper) functions
 * still start from Node, with socketpairs (docs/process.md).
 */
import {expect} from 'chai'
import {execa} from 'execa'
import {cp, readdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {nativeHelperPath} from '../../src/lib/process/native-spawner.js'
import {BIN_RUN} from '../support/serve.js'
import {TempDirs, writeExecutable} from '../support/tmp.js'

const KPT = '/usr/bin/kpt'

/** What shell functions do with their stdio by name; exit 3 when stdin is not a pipe. */
const SCRIPT = `#!/bin/sh
[ -p /dev/stdin ] || { echo "stdin is not a pipe" >&2; exit 3; }
echo "reading /dev/stdin" > /dev/stderr
sed 's/value: one/value: two/' /dev/stdin > /dev/stdout
`

const KPTFILE = `apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: pkg
pipeline:
  mutators:
  - exec: ./fn.sh
`
const CM = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  value: one\n'

async function files(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {}
  for (const name of (await readdir(dir)).sort()) out[name] = await readFile(path.join(dir, name), 'utf8')
  return out
}

describe('functions get pipes as their stdio, as under kpt (fnr eval --exec, fnr render)', function () {
  this.timeout(60_000)
  const temp = new TempDirs()
  let dir: string
  let script: string

  before(async () => {
    if (!nativeHelperPath()) throw new Error('the native spawn helper is not built (dist/native/fnr-spawn): run `npm run build` where a C compiler is installed')
    dir = await temp.make('fnr-stdio-pipes-')
    script = await writeExecutable(path.join(dir, 'fn.sh'), SCRIPT)
    const pkg = path.join(dir, 'pkg')
    await cp(path.join(dir, 'fn.sh'), path.join(pkg, 'fn.sh'))
    await writeFile(path.join(pkg, 'Kptfile'), KPTFILE)
    await writeFile(path.join(pkg, 'cm.yaml'), CM)
  })
  after(() => temp.cleanup())

  /** A fresh copy of the package for one run. */
  const copy = async (name: string): Promise<string> => {
    const to = path.join(dir, name)
    await cp(path.join(dir, 'pkg'), to, {recursive: true})
    return to
  }

  it('eval --exec -o stdout: the same stdout as kpt, byte for byte, and the function saw a pipe', async () => {
    const [k, f] = [await copy('eval-kpt'), await copy('eval-fnr')]
    const byKpt = await execa(KPT, ['fn', 'eval', k, '--exec', script, '-o', 'stdout'], {reject: false})
    const byFnr = await execa(process.execPath, [BIN_RUN, 'eval', f, '--exec', script, '-o', 'stdout'], {reject: false})
    expect(byKpt.exitCode, byKpt.stderr).to.equal(0)
    expect(byFnr.exitCode, byFnr.stderr).to.equal(0)
    expect(byFnr.stdout).to.equal(byKpt.stdout)
    expect(byFnr.stdout).to.contain('value: two')
    for (const r of [byKpt, byFnr]) expect(r.stderr).to.contain('"reading /dev/stdin"').and.not.contain('not a pipe')
  })

  it('render with an exec step, in place: the same files as kpt', async () => {
    const [k, f] = [await copy('render-kpt'), await copy('render-fnr')]
    const byKpt = await execa(KPT, ['fn', 'render', k, '--allow-exec'], {reject: false, cwd: k})
    const byFnr = await execa(process.execPath, [BIN_RUN, 'render', f, '--allow-exec'], {reject: false, cwd: f})
    expect(byKpt.exitCode, byKpt.stderr).to.equal(0)
    expect(byFnr.exitCode, byFnr.stderr).to.equal(0)
    expect(await files(f)).to.deep.equal(await files(k))
    expect((await files(f))['cm.yaml']).to.contain('value: two')
  })

  it('FNR_SPAWNER=off starts the function from Node: socketpairs, and the script says so (the fallback where no helper is built)', async () => {
    const f = await copy('eval-off')
    const r = await execa(process.execPath, [BIN_RUN, 'eval', f, '--exec', script, '-o', 'stdout'], {reject: false, env: {FNR_SPAWNER: 'off'}})
    expect(r.exitCode).to.not.equal(0)
    expect(r.stderr).to.contain('stdin is not a pipe')
  })
})
