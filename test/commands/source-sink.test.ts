/**
 * `fnr source` and `fnr sink` against the real kpt fn source and sink, in the same run: stdout,
 * the files written, the error lines and exit codes, byte for byte; the one deliberate difference
 * (an empty stdin) pinned beside kpt's behaviour.
 */
import {existsSync, readdirSync, writeFileSync} from 'node:fs'
import path from 'node:path'
import {fileURLToPath} from 'node:url'

import {expect} from 'chai'
import {execa} from 'execa'

import {runCli} from '../support/cli.js'
import {BIN_RUN} from '../support/serve.js'
import {kpt, PACKAGES, readTree, Scratch} from '../resourcelist/helpers.js'

const HELLO = fileURLToPath(new URL('../../examples/hello', import.meta.url))
const SET_LABELS = fileURLToPath(new URL('../../functions/set-labels', import.meta.url))

/** fnr with stdin, through the oclif command (FNR_NO_FAST_PATH) or the fast path (execa drops the last newline of stdout and stderr). */
function fnr(args: string[], input = '', oclif = false) {
  return runCli(args, {input, env: oclif ? {FNR_NO_FAST_PATH: '1'} : {}})
}

describe('fnr source and fnr sink (kpt fn source and sink, side by side with kpt)', function () {
  this.timeout(60_000)
  let scratch: Scratch
  beforeEach(() => {
    scratch = new Scratch()
  })
  afterEach(() => scratch.cleanup())

  // bin/run.js's fast path: every case
  {
    const oclif = false
    const how = 'fast path'
    it(`source prints what kpt prints, wrapped, unwrapped and with --fn-config (${how})`, async () => {
      const mixed = scratch.tree(PACKAGES.mixed!, 'mixed')
      const basic = scratch.tree(PACKAGES.basic!, 'basic')
      const fc = path.join(scratch.root, 'fc.yaml')
      writeFileSync(fc, 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fc\ndata:\n  a: "1"\n')
      const cases: string[][] = [[HELLO], [mixed], [basic], [path.join(basic, 'deploy.yaml')], [basic, '-o', 'unwrap'], [mixed, '--output=unwrap'], [basic, '--fn-config', fc], [basic, '-o', 'unwrap', '--fn-config', fc]]
      for (const args of cases) {
        const want = kpt(['fn', 'source', ...args])
        const got = await fnr(['source', ...args], '', oclif)
        expect(want.status, args.join(' ')).to.equal(0)
        expect(got.stderr, args.join(' ')).to.equal('')
        expect(got.exitCode, args.join(' ')).to.equal(0)
        expect(got.stdout + '\n', args.join(' ')).to.equal(want.stdout)
      }
      // DIR defaults to the current directory
      const here = await runCli(['source'], {cwd: basic})
      expect(here.stdout + '\n').to.equal(kpt(['fn', 'source'], {cwd: basic}).stdout)
    })

    it(`source and sink fail as kpt does: the same line, exit 1 (${how})`, async () => {
      const basic = scratch.tree(PACKAGES.basic!, 'basic')
      const exists = scratch.tree({'x.yaml': 'a: 1\n'}, 'exists')
      const twoItems = path.join(scratch.root, 'two.yaml')
      writeFileSync(twoItems, 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n')
      const NEW = '<new>'
      const cases: Array<[string[], string]> = [
        [['source', basic, '-o', 'json'], ''],
        [['source', basic, basic], ''],
        [['source', path.join(scratch.root, 'missing')], ''],
        [['source', basic, '--fn-config', twoItems], ''],
        [['sink', exists], 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n'],
        [['sink'], ''],
        [['sink', NEW], 'garbage: [\n'],
      ]
      for (const [args, input] of cases) {
        // a directory to create: each its own
        const kptDir = scratch.path('kpt-new')
        const fnrDir = scratch.path('fnr-new')
        const want = kpt(['fn', ...args.map((a) => (a === NEW ? kptDir : a))], {input})
        const got = await fnr(args.map((a) => (a === NEW ? fnrDir : a)), input, oclif)
        expect(want.status, args.join(' ')).to.equal(1)
        expect(got.exitCode, `${args.join(' ')}: ${got.stderr}`).to.equal(1)
        expect(got.stdout, args.join(' ')).to.equal('')
        if (args.includes(NEW)) {
          // Both name the YAML error (the wording is each parser's own); kpt leaves an empty
          // directory behind, fnr writes nothing.
          expect(got.stderr).to.match(/^error: .*garbage|^error: .*stdin/)
          expect(existsSync(kptDir)).to.equal(true)
          expect(existsSync(fnrDir)).to.equal(false)
        } else expect(got.stderr + '\n', args.join(' ')).to.equal(want.stderr)
      }
      // fnr's own codes when asked: a usage error is 2
      expect((await fnr(['source', basic, '-o', 'json', '--exit-codes', 'fnr'], '', oclif)).exitCode).to.equal(2)
    })

    it(`sink writes the files kpt writes, for kpt's and fnr's source alike (${how})`, async () => {
      for (const name of ['basic', 'mixed', 'rich'] as const) {
        const pkg = scratch.tree(PACKAGES[name]!, name)
        const list = kpt(['fn', 'source', pkg]).stdout
        const want = scratch.path(`kpt-${name}`)
        expect(kpt(['fn', 'sink', want], {input: list}).status).to.equal(0)
        const got = scratch.path(`fnr-${name}`)
        const r = await fnr(['sink', got], list, oclif)
        expect(r.exitCode, r.stderr).to.equal(0)
        expect(r.stdout + r.stderr).to.equal('')
        expect(readTree(got), name).to.deep.equal(readTree(want))
      }
    })
  }

  it('the oclif commands (FNR_NO_FAST_PATH, --help) take the same command lines and fail the same way', async () => {
    const basic = scratch.tree(PACKAGES.basic!, 'basic')
    const src = await fnr(['source', basic, '-o', 'unwrap'], '', true)
    expect(src.stdout + '\n').to.equal(kpt(['fn', 'source', basic, '-o', 'unwrap']).stdout)
    const out = scratch.path('out')
    expect((await fnr(['sink', out], kpt(['fn', 'source', basic]).stdout, true)).exitCode).to.equal(0)
    expect(readTree(out)).to.deep.equal(readTree(basic))
    const bad = await fnr(['source', basic, basic], '', true)
    expect([bad.exitCode, bad.stderr]).to.deep.equal([1, 'error: accepts at most 1 arg(s), received 2'])
    const help = await fnr(['sink', '--help'])
    expect(help.stdout).to.contain('kpt fn sink').and.to.contain('USAGE')
  })

  it('a whole pipe without kpt (fnr source | fnr eval - | fnr sink) writes what kpt\'s pipe writes', async () => {
    const pkg = scratch.tree(PACKAGES.basic!, 'basic')
    const want = scratch.path('kpt-out')
    const got = scratch.path('fnr-out')
    const fnrCmd = `${process.execPath} ${BIN_RUN}`
    const pipe = (src: string, ev: string, sink: string, out: string) => `set -o pipefail; ${src} source ${pkg} | ${ev} eval - --exec ${SET_LABELS} -- app=web | ${sink} sink ${out}`
    const k = await execa('bash', ['-c', pipe('kpt fn', 'kpt fn', 'kpt fn', want)], {reject: false})
    expect(k.exitCode, k.stderr).to.equal(0)
    const f = await execa('bash', ['-c', pipe(fnrCmd, fnrCmd, fnrCmd, got)], {reject: false, env: {FNR_CONTAINER_RUNTIME: 'none'}})
    expect(f.exitCode, f.stderr).to.equal(0)
    expect(readTree(got)).to.deep.equal(readTree(want))
    expect(readTree(got)['deploy.yaml']).to.contain('app: web')
  })

  it('sink refuses an empty stdin and writes nothing, where kpt makes an empty directory; "items: []" makes one in both', async () => {
    const kptOut = scratch.path('kpt-empty')
    expect(kpt(['fn', 'sink', kptOut], {input: ''}).status).to.equal(0)
    expect(readdirSync(kptOut)).to.deep.equal([])
    const out = scratch.path('fnr-empty')
    const r = await fnr(['sink', out], '')
    expect(r.exitCode).to.equal(1)
    expect(r.stderr).to.equal(`error: stdin is empty: nothing written to ${out} (the command before fnr sink gave no output; an empty package is written only from an explicit "items: []")`)
    expect(existsSync(out)).to.equal(false)
    const list = 'apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n'
    const kptList = scratch.path('kpt-list')
    expect(kpt(['fn', 'sink', kptList], {input: list}).status).to.equal(0)
    const fnrList = scratch.path('fnr-list')
    expect((await fnr(['sink', fnrList], list)).exitCode).to.equal(0)
    expect(readdirSync(fnrList)).to.deep.equal(readdirSync(kptList)).and.to.deep.equal([])
  })
})
