/**
 * fnr eval never loses data: empty output is an error, writes are atomic, invalid output fails
 * like kpt ([FAIL], results.yaml, a line number), and -o DIR is checked before the function runs.
 */
import {expect} from 'chai'
import {execa} from 'execa'
import {mkdir, readFile, readdir, symlink, writeFile} from 'node:fs/promises'
import {existsSync} from 'node:fs'
import path from 'node:path'

import {runCli} from '../support/cli.js'
import {TempDirs, writeExecutable} from '../support/tmp.js'

const KPT = '/usr/bin/kpt'

async function tree(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {}
  async function walk(d: string): Promise<void> {
    for (const e of await readdir(d, {withFileTypes: true})) {
      const p = path.join(d, e.name)
      if (e.isDirectory()) await walk(p)
      else if (e.isSymbolicLink()) out[path.relative(dir, p)] = `-> ${p}`
      else out[path.relative(dir, p)] = await readFile(p, 'utf8')
    }
  }
  await walk(dir)
  return out
}

const CM = (name: string): string => `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${name}\ndata:\n  k: v\n`

describe('fnr eval: never empty, atomic writes, failures like kpt', function () {
  this.timeout(60_000)
  const temp = new TempDirs()
  let dir: string

  beforeEach(async () => {
    dir = await temp.make('fnr-eval-safety-')
  })
  after(() => temp.cleanup())

  async function pkg(): Promise<string> {
    const p = path.join(dir, 'pkg')
    await mkdir(p)
    await writeFile(path.join(p, 'a.yaml'), CM('a'))
    await writeFile(path.join(p, 'b.yaml'), CM('b'))
    return p
  }

  for (const [what, body] of [
    ['nothing', ''],
    ['only white space', 'printf "  \\n\\n\\t\\n"'],
  ] as const) {
    it(`exit 0 with ${what} on stdout is an error and leaves the package as it was (kpt deletes every file)`, async () => {
      const p = await pkg()
      const before = await tree(p)
      const fn = await writeExecutable(path.join(dir, 'empty'), `#!/bin/sh\ncat >/dev/null\n${body}\n`)
      const res = path.join(dir, 'res')
      const r = await runCli(['eval', '--input', p, '-o', p, '--exec', fn, '--results-dir', res])
      expect(r.exitCode, r.stderr).to.equal(1)
      expect(r.stderr).to.contain(`[FAIL] "${fn}"`)
      expect(r.stderr).to.contain(`exited 0 but wrote ${what} to stdout`)
      expect(r.stderr).to.contain('nothing was written')
      expect(await tree(p)).to.deep.equal(before)
      expect(await readFile(path.join(res, 'results.yaml'), 'utf8')).to.contain('exitCode: 1')
      // And on stdin/stdout: no output at all rather than an empty list.
      const s = await runCli(['eval', '-', '--exec', fn], {input: CM('a')})
      expect(s.exitCode).to.equal(1)
      expect(s.stdout).to.equal('')
    })
  }

  it('items: [] is still a valid (deleting) output, as in kpt', async () => {
    const p = await pkg()
    const fn = await writeExecutable(path.join(dir, 'none'), '#!/bin/sh\ncat >/dev/null\nprintf "apiVersion: config.kubernetes.io/v1\\nkind: ResourceList\\nitems: []\\n"\n')
    const r = await runCli(['eval', '--input', p, '-o', p, '--exec', fn])
    expect(r.exitCode, r.stderr).to.equal(0)
    expect(await tree(p)).to.deep.equal({})
  })

  /** A function that changes a.yaml and adds a resource at `bad` (sorted after a.yaml). */
  async function writerTo(bad: string): Promise<string> {
    return writeExecutable(
      path.join(dir, 'writer'),
      `#!/usr/bin/env node
let s = require('fs').readFileSync(0, 'utf8')
s = s.replace(/k: v/g, 'k: changed')
s = s.replace('items:\\n', 'items:\\n- apiVersion: v1\\n  kind: ConfigMap\\n  metadata:\\n    name: new\\n    annotations:\\n      config.kubernetes.io/path: ${bad}\\n')
process.stdout.write(s)
`,
    )
  }

  it('writes nothing when one output path lies under a file (atomic in place)', async () => {
    const p = await pkg()
    await writeFile(path.join(p, 'f'), 'a plain file\n')
    const before = await tree(p)
    const r = await runCli(['eval', '--input', p, '-o', p, '--exec', await writerTo('f/new.yaml')])
    expect(r.exitCode).to.equal(1)
    expect(r.stderr).to.contain('f is not a directory')
    expect(await tree(p)).to.deep.equal(before)
    expect(await readdir(p)).to.have.members(['a.yaml', 'b.yaml', 'f'])
  })

  it('writes nothing when one output path goes through a symbolic link (atomic in place)', async () => {
    const p = await pkg()
    const outside = path.join(dir, 'outside')
    await mkdir(outside)
    await symlink(outside, path.join(p, 'link'))
    const before = await tree(p)
    const r = await runCli(['eval', '--input', p, '-o', p, '--exec', await writerTo('link/new.yaml')])
    expect(r.exitCode).to.equal(1)
    expect(r.stderr).to.contain('link is a symbolic link')
    expect(await tree(p)).to.deep.equal(before)
    expect(await readdir(outside)).to.deep.equal([])
  })

  it('writes nothing when an output file is a symbolic link, and leaves no temporary files', async () => {
    const p = await pkg()
    const target = path.join(dir, 'target.yaml')
    await writeFile(target, CM('z'))
    await symlink(target, path.join(p, 'z.yaml'))
    const before = await tree(p)
    const r = await runCli(['eval', '--input', p, '-o', p, '--exec', await writerTo('c.yaml')])
    expect(r.exitCode).to.equal(1)
    expect(r.stderr).to.contain('z.yaml: it is a symbolic link')
    expect(await tree(p)).to.deep.equal(before)
    expect(await readFile(target, 'utf8')).to.equal(CM('z'))
    expect((await readdir(p)).filter((n) => n.startsWith('.'))).to.deep.equal([])
  })

  it('-o NEWDIR is all or nothing: no directory is left after a failure', async () => {
    const p = await pkg()
    const out = path.join(dir, 'out')
    const r = await runCli(['eval', '--input', p, '-o', out, '--exec', await writerTo('x/../../escape.yaml')])
    expect(r.exitCode).to.equal(1)
    expect(existsSync(out)).to.equal(false)
    expect((await readdir(dir)).filter((n) => n.startsWith('.'))).to.deep.equal([])
    const ok = await runCli(['eval', '--input', p, '-o', out, '--exec', await writerTo('sub/new.yaml')])
    expect(ok.exitCode, ok.stderr).to.equal(0)
    expect(Object.keys(await tree(out)).sort()).to.deep.equal(['a.yaml', 'b.yaml', 'sub/new.yaml'])
  })

  it('keeps file modes when it rewrites files in place', async () => {
    const p = await pkg()
    await execa('chmod', ['600', path.join(p, 'a.yaml')])
    const r = await runCli(['eval', '--input', p, '-o', p, '--exec', await writerTo('c.yaml')])
    expect(r.exitCode, r.stderr).to.equal(0)
    const {stdout} = await execa('stat', ['-c', '%a', path.join(p, 'a.yaml')])
    expect(stdout).to.equal('600')
    expect(await readFile(path.join(p, 'a.yaml'), 'utf8')).to.contain('k: changed')
  })

  it('checks an existing -o directory before running the function', async () => {
    const p = await pkg()
    const out = path.join(dir, 'exists')
    await mkdir(out)
    const marker = path.join(dir, 'ran')
    const fn = await writeExecutable(path.join(dir, 'marks'), `#!/bin/sh\ntouch ${marker}\nexec cat\n`)
    const r = await runCli(['eval', '--input', p, '-o', out, '--exec', fn])
    expect(r.exitCode).to.equal(1)
    expect(r.stderr).to.contain('already exists, please delete the directory and retry')
    expect(r.stderr).not.to.contain('[RUNNING]')
    expect(existsSync(marker)).to.equal(false)
  })

  it('invalid function output fails like kpt: [FAIL], results.yaml (exitCode 1) and a line number', async () => {
    const fn = await writeExecutable(path.join(dir, 'garbage'), '#!/bin/sh\ncat >/dev/null\nprintf "items:\\n- a: b\\n c: d\\n"\n')
    const p = await pkg()
    const kptPkg = path.join(dir, 'kpt-pkg')
    await execa('cp', ['-r', p, kptPkg])
    const kptRes = path.join(dir, 'kpt-res')
    const k = await execa(KPT, ['fn', 'eval', kptPkg, '--exec', fn, '--results-dir', kptRes], {reject: false})
    expect(k.exitCode).to.equal(1)
    const res = path.join(dir, 'res')
    const before = await tree(p)
    const r = await runCli(['eval', '--input', p, '-o', p, '--exec', fn, '--results-dir', res])
    expect(r.exitCode).to.equal(1)
    expect(r.stderr.replace(/ in \S+\n/, ' in 0s\n')).to.contain(`[FAIL] "${fn}" in 0s\n\nFor complete results, see ${res}/results.yaml\n`)
    expect(r.stderr).to.match(/MalformedYAMLError: line 3, column \d+: /)
    expect(await readFile(path.join(res, 'results.yaml'), 'utf8')).to.equal(await readFile(path.join(kptRes, 'results.yaml'), 'utf8'))
    expect(await tree(p)).to.deep.equal(before)
  })

  it('a broken input file is reported with its line number', async () => {
    const p = await pkg()
    await writeFile(path.join(p, 'bad.yaml'), `${CM('x')}---\n${CM('y')}  bad: [\n`)
    const r = await runCli(['eval', '--input', p, '-o', p, '--exec', 'cat'])
    expect(r.exitCode, r.stderr).to.equal(1)
    expect(r.stderr).to.match(/bad\.yaml: MalformedYAMLError: line 1[1-5], column \d+: /)
  })
})
