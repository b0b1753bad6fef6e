/**
 * Every failure of an in-place `fnr eval DIR` / `fnr render DIR` leaves the package byte for byte
 * as it was (contents, modes, owners, the replaced files' inodes, no leftovers): a file that
 * cannot be deleted, a read-only file, a file of another user, a full file system, a file that
 * cannot be renamed mid-apply, a signal between two renames, a path with a control character.
 * kpt 1.0.0-beta.56 is run on a copy of the same package for each case, and what it does is
 * pinned: where kpt half-writes the package, fnr differs on purpose.
 *
 * The tests run as root, which ignores permissions, so fnr and kpt run as `nobody` (setpriv)
 * where a permission is the point; the full file system is a small tmpfs mounted for the test.
 */
import {expect} from 'chai'
import {execa, type ResultPromise} from 'execa'
import {constants} from 'node:fs'
import {chmod, chown, lstat, mkdir, open, readFile, readdir, readlink, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {BIN_RUN} from '../support/serve.js'
import {TempDirs, writeExecutable} from '../support/tmp.js'

const KPT = '/usr/bin/kpt'
const AS_NOBODY = ['setpriv', '--reuid=nobody', '--regid=nogroup', '--clear-groups']
const NOBODY = {uid: 65534, gid: 65534}

interface Entry {
  mode: number
  uid: number
  gid: number
  ino: number
  content: string
}

/** Every entry under dir (hidden ones too): content, mode, owner and inode. */
async function snapshot(dir: string): Promise<Record<string, Entry>> {
  const out: Record<string, Entry> = {}
  async function walk(d: string): Promise<void> {
    for (const name of (await readdir(d)).sort()) {
      const p = path.join(d, name)
      const st = await lstat(p)
      const content = st.isDirectory() ? '<dir>' : st.isSymbolicLink() ? `-> ${await readlink(p)}` : await readFile(p, 'utf8')
      out[path.relative(dir, p)] = {mode: st.mode, uid: st.uid, gid: st.gid, ino: st.ino, content}
      if (st.isDirectory()) await walk(p)
    }
  }
  await walk(dir)
  return out
}

const cm = (name: string, value = 'v') => `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${name}\ndata:\n  k: ${value}\n`

/** A function printing a fixed ResourceList: Kptfile and a.yaml changed, c.yaml new, sub/b.yaml gone. */
function output(kptfile: string, extra = ''): string {
  const item = (text: string, p: string) =>
    text
      .trimEnd()
      .split('\n')
      .map((l, i) => (i === 0 ? `- ${l}` : `  ${l}`))
      .join('\n')
      .replace(/\n {2}metadata:\n/, `\n  metadata:\n    annotations:\n      internal.config.kubernetes.io/path: '${p}'\n`)
  return [
    'apiVersion: config.kubernetes.io/v1',
    'kind: ResourceList',
    'items:',
    item(kptfile.replace('name: p\n', 'name: p\n  labels:\n    changed: "yes"\n'), 'Kptfile'),
    item(cm('a', 'changed'), 'a.yaml'),
    item(cm('c', 'new'), 'c.yaml'),
    extra,
  ].join('\n')
}

describe('in-place eval and render: every failure keeps the package as it was', function () {
  this.timeout(120_000)
  const temp = new TempDirs()
  const started: Array<ResultPromise<{reject: false}>> = []
  let dir: string

  beforeEach(async () => {
    dir = await temp.make('fnr-inplace-')
    await chmod(dir, 0o755)
  })
  after(async () => {
    for (const p of started) p.kill('SIGKILL')
    await temp.cleanup()
  })

  /** The package (owned by nobody when `owner` says so) and the function that rewrites it. */
  async function makePackage(name: string, options: {owner?: 'nobody'; extraOutput?: string; parent?: string} = {}): Promise<{pkg: string; fn: string}> {
    const fnPath = path.join(dir, `${name}-fn`)
    const kptfile = `apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: p\npipeline:\n  mutators:\n    - exec: ${fnPath}\n`
    const pkg = path.join(options.parent ?? dir, name)
    await mkdir(path.join(pkg, 'sub'), {recursive: true})
    await writeFile(path.join(pkg, 'Kptfile'), kptfile)
    await writeFile(path.join(pkg, 'a.yaml'), cm('a'))
    await writeFile(path.join(pkg, 'sub', 'b.yaml'), cm('b'))
    await writeExecutable(fnPath, `#!/bin/sh\ncat >/dev/null\ncat <<'EOF'\n${output(kptfile, options.extraOutput)}\nEOF\n`)
    if (options.owner === 'nobody') await execa('chown', ['-R', 'nobody:nogroup', pkg])
    return {pkg, fn: fnPath}
  }

  /** fnr eval PKG --exec FN (or fnr render PKG --allow-exec), optionally as nobody. */
  function fnr(cmd: 'eval' | 'render', pkg: string, fn: string, asNobody = false, env: Record<string, string> = {}): ResultPromise<{reject: false}> {
    const args = cmd === 'eval' ? ['eval', pkg, '--exec', fn] : ['render', pkg, '--allow-exec']
    const argv = [...(asNobody ? AS_NOBODY : []), process.execPath, BIN_RUN, ...args]
    // fnr's own exit codes (5 permission, 7 space, …): kpt's are all 1.
    return execa(argv[0]!, argv.slice(1), {reject: false, env: {FNR_EXIT_CODES: 'fnr', ...env}})
  }

  async function kpt(cmd: 'eval' | 'render', pkg: string, fn: string, asNobody = false) {
    const args = cmd === 'eval' ? ['fn', 'eval', pkg, '--exec', fn] : ['fn', 'render', pkg, '--allow-exec']
    const argv = [...(asNobody ? AS_NOBODY : []), KPT, ...args]
    return execa(argv[0]!, argv.slice(1), {reject: false})
  }

  for (const cmd of ['eval', 'render'] as const) {
    it(`${cmd}: a file that cannot be deleted (read-only subdirectory) fails before anything is written (kpt half-writes)`, async () => {
      const {pkg, fn} = await makePackage('pkg', {owner: 'nobody'})
      await chmod(path.join(pkg, 'sub'), 0o555)
      const before = await snapshot(pkg)
      const r = await fnr(cmd, pkg, fn, true)
      expect(r.exitCode, String(r.stderr)).to.equal(5)
      expect(String(r.stderr)).to.contain(`cannot delete sub/b.yaml: ${pkg}/sub: permission denied (EACCES)`)
      expect(await snapshot(pkg)).to.deep.equal(before)

      const k = await makePackage('kpt-pkg', {owner: 'nobody'})
      await chmod(path.join(k.pkg, 'sub'), 0o555)
      const kr = await kpt(cmd, k.pkg, k.fn, true)
      expect(kr.exitCode).to.equal(1)
      expect(String(kr.stderr)).to.contain('permission denied')
      // kpt has already rewritten a.yaml and the Kptfile.
      expect(await readFile(path.join(k.pkg, 'a.yaml'), 'utf8')).to.contain('k: changed')
    })
  }

  it('a read-only (0444) file owned by another user fails like kpt (EACCES); nothing changes, the owner stays', async () => {
    const {pkg, fn} = await makePackage('pkg', {owner: 'nobody'})
    await chown(path.join(pkg, 'a.yaml'), 0, 0)
    await chmod(path.join(pkg, 'a.yaml'), 0o444)
    const before = await snapshot(pkg)
    const r = await fnr('eval', pkg, fn, true)
    expect(r.exitCode, String(r.stderr)).to.equal(5)
    expect(String(r.stderr)).to.contain(`cannot replace a.yaml: ${pkg}/a.yaml: permission denied (EACCES)`)
    expect(await snapshot(pkg)).to.deep.equal(before)

    const k = await makePackage('kpt-pkg', {owner: 'nobody'})
    await chown(path.join(k.pkg, 'a.yaml'), 0, 0)
    await chmod(path.join(k.pkg, 'a.yaml'), 0o444)
    const kr = await kpt('eval', k.pkg, k.fn, true)
    expect(kr.exitCode).to.equal(1)
    expect(String(kr.stderr)).to.contain(`open ${k.pkg}/a.yaml: permission denied`)
  })

  it('a read-only (0444) file of the user fails like kpt (EACCES)', async () => {
    const {pkg, fn} = await makePackage('pkg', {owner: 'nobody'})
    await chmod(path.join(pkg, 'a.yaml'), 0o444)
    const before = await snapshot(pkg)
    const r = await fnr('render', pkg, fn, true)
    expect(r.exitCode, String(r.stderr)).to.equal(5)
    expect(String(r.stderr)).to.contain('cannot replace a.yaml')
    expect(await snapshot(pkg)).to.deep.equal(before)
  })

  it('as root a 0444 file is replaced like kpt does (mode and owner kept)', async () => {
    const {pkg, fn} = await makePackage('pkg', {owner: 'nobody'})
    await chmod(path.join(pkg, 'a.yaml'), 0o444)
    const r = await fnr('eval', pkg, fn)
    expect(r.exitCode, String(r.stderr)).to.equal(0)
    const st = await lstat(path.join(pkg, 'a.yaml'))
    expect([st.mode & 0o777, st.uid, st.gid]).to.deep.equal([0o444, NOBODY.uid, NOBODY.gid])
    expect(await readFile(path.join(pkg, 'a.yaml'), 'utf8')).to.equal(cm('a', 'changed'))
  })

  it('a writable file of another user is written through, keeping its owner (as kpt)', async () => {
    const {pkg, fn} = await makePackage('pkg', {owner: 'nobody'})
    await chown(path.join(pkg, 'a.yaml'), 0, 0)
    await chmod(path.join(pkg, 'a.yaml'), 0o666)
    const ino = (await lstat(path.join(pkg, 'a.yaml'))).ino
    const r = await fnr('eval', pkg, fn, true)
    expect(r.exitCode, String(r.stderr)).to.equal(0)
    const st = await lstat(path.join(pkg, 'a.yaml'))
    expect([st.uid, st.mode & 0o777, st.ino]).to.deep.equal([0, 0o666, ino])
    expect(await readFile(path.join(pkg, 'a.yaml'), 'utf8')).to.equal(cm('a', 'changed'))

    const k = await makePackage('kpt-pkg', {owner: 'nobody'})
    await chown(path.join(k.pkg, 'a.yaml'), 0, 0)
    await chmod(path.join(k.pkg, 'a.yaml'), 0o666)
    expect((await kpt('eval', k.pkg, k.fn, true)).exitCode).to.equal(0)
    expect((await lstat(path.join(k.pkg, 'a.yaml'))).uid).to.equal(0)
  })

  it('a file that cannot be removed mid-apply (chattr +i) is rolled back: inodes, contents and modes as they were', async () => {
    const {pkg, fn} = await makePackage('pkg')
    const b = path.join(pkg, 'sub', 'b.yaml')
    await execa('chattr', ['+i', b])
    try {
      const before = await snapshot(pkg)
      const r = await fnr('eval', pkg, fn)
      expect(r.exitCode, String(r.stderr)).to.equal(5)
      expect(String(r.stderr)).to.contain(`${b}: permission denied (EPERM)`)
      expect(await snapshot(pkg)).to.deep.equal(before)

      const k = await makePackage('kpt-pkg')
      await execa('chattr', ['+i', path.join(k.pkg, 'sub', 'b.yaml')])
      try {
        const kr = await kpt('eval', k.pkg, k.fn)
        expect(kr.exitCode).to.equal(1)
        expect(await readFile(path.join(k.pkg, 'a.yaml'), 'utf8')).to.contain('k: changed')
      } finally {
        await execa('chattr', ['-i', path.join(k.pkg, 'sub', 'b.yaml')])
      }
    } finally {
      await execa('chattr', ['-i', b])
    }
  })

  it('a full file system (ENOSPC) leaves the package intact and no temporary file behind', async () => {
    const mnt = path.join(dir, 'mnt')
    await mkdir(mnt)
    await execa('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', mnt])
    try {
      const big = `- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: big\n    annotations:\n      internal.config.kubernetes.io/path: 'big.yaml'\n  data:\n    k: ${'x'.repeat(200_000)}`
      const {pkg, fn} = await makePackage('pkg', {extraOutput: big, parent: mnt})
      const before = await snapshot(pkg)
      const r = await fnr('eval', pkg, fn)
      expect(r.exitCode, String(r.stderr)).to.equal(7)
      expect(String(r.stderr)).to.contain('no space left on device (ENOSPC)')
      expect(await snapshot(pkg)).to.deep.equal(before)
    } finally {
      await execa('umount', [mnt])
    }
  })

  it('an output file that is a mount point is refused before anything is written (kpt writes through it)', async () => {
    const {pkg, fn} = await makePackage('pkg')
    const outside = path.join(dir, 'outside.yaml')
    await writeFile(outside, cm('a'))
    await execa('mount', ['--bind', outside, path.join(pkg, 'a.yaml')])
    try {
      const before = await snapshot(pkg)
      const r = await fnr('eval', pkg, fn)
      expect(r.exitCode, String(r.stderr)).to.equal(2)
      expect(String(r.stderr)).to.contain(`${pkg}/a.yaml is a mount point`)
      expect(await snapshot(pkg)).to.deep.equal(before)
      expect(await readFile(outside, 'utf8')).to.equal(cm('a'))
    } finally {
      await execa('umount', [path.join(pkg, 'a.yaml')])
    }
  })

  it('a file already in the package under a name with a newline is read and rewritten, as kpt does (only new names are refused)', async () => {
    const contents = async (pkg: string): Promise<Record<string, string>> => {
      const out: Record<string, string> = {}
      for (const [rel, e] of Object.entries(await snapshot(pkg))) out[rel] = e.content
      return out
    }
    const results: Array<Record<string, string>> = []
    for (const tool of ['fnr', 'kpt'] as const) {
      const pkg = path.join(dir, `nl-${tool}`)
      await mkdir(pkg)
      await writeFile(path.join(pkg, 'Kptfile'), 'apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: p\n')
      await writeFile(path.join(pkg, 'x\ny.yaml'), cm('nl'))
      const fn = await writeExecutable(path.join(dir, `nl-${tool}-fn`), "#!/bin/sh\nsed 's/k: v/k: changed/'\n")
      const r = tool === 'fnr' ? await fnr('eval', pkg, fn) : await kpt('eval', pkg, fn)
      expect(r.exitCode, `${tool}: ${String(r.stderr)}`).to.equal(0)
      results.push(await contents(pkg))
    }
    expect(results[0]!['x\ny.yaml']).to.contain('k: changed')
    expect(results[0]).to.deep.equal(results[1])
  })

  it('an output path with a newline is refused, escaped in the message, before anything is written (kpt writes it)', async () => {
    const extra = `- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: nl\n    annotations:\n      internal.config.kubernetes.io/path: "x\\ny.yaml"`
    const {pkg, fn} = await makePackage('pkg', {extraOutput: extra})
    const before = await snapshot(pkg)
    const r = await fnr('eval', pkg, fn)
    expect(r.exitCode, String(r.stderr)).to.equal(1)
    expect(String(r.stderr)).to.contain('invalid resource path "x\\ny.yaml": it contains a control character (a new file')
    expect(await snapshot(pkg)).to.deep.equal(before)

    const k = await makePackage('kpt-pkg', {extraOutput: extra})
    expect((await kpt('eval', k.pkg, k.fn)).exitCode).to.equal(0)
    expect(await readdir(k.pkg)).to.include('x\ny.yaml')
  })

  /** Reads the next step the writer announces on the FIFO (or fails if the process ends first). */
  async function nextStep(fifo: string, proc: ResultPromise<{reject: false}>): Promise<string> {
    let ended = false
    const end = proc.then(() => {
      ended = true
    })
    const read = readFile(fifo, 'utf8')
    await Promise.race([read, end])
    if (ended) {
      // Unblock the read still waiting for a writer.
      await (await open(fifo, constants.O_WRONLY | constants.O_NONBLOCK)).close()
      await read
      throw new Error(`fnr ended before pausing: ${String((await proc).stderr)}`)
    }
    return (await read).trim()
  }

  for (const [cmd, signal, code] of [
    ['eval', 'SIGTERM', 143],
    ['render', 'SIGINT', 130],
  ] as const) {
    it(`${cmd}: ${signal} between two renames undoes the renames; exit ${code}, package byte-identical`, async () => {
      const {pkg, fn} = await makePackage('pkg')
      const fifo = path.join(dir, 'steps')
      await execa('mkfifo', [fifo])
      const before = await snapshot(pkg)
      const proc = fnr(cmd, pkg, fn, false, {FNR_TEST_WRITE_PAUSE: 'apply:a.yaml', FNR_TEST_WRITE_FIFO: fifo})
      started.push(proc)
      expect(await nextStep(fifo, proc)).to.equal('apply:a.yaml')
      // The Kptfile and a.yaml are replaced now; c.yaml and the delete are still to come.
      expect(await readFile(path.join(pkg, 'a.yaml'), 'utf8')).to.equal(cm('a', 'changed'))
      proc.kill(signal)
      const r = await proc
      expect(r.exitCode, String(r.stderr)).to.equal(code)
      expect(String(r.stderr)).to.contain(`interrupted by ${signal}`)
      expect(await snapshot(pkg)).to.deep.equal(before)
    })
  }

  it('a second signal during the undo does not cut it short', async () => {
    const {pkg, fn} = await makePackage('pkg')
    const fifo = path.join(dir, 'steps')
    await execa('mkfifo', [fifo])
    const before = await snapshot(pkg)
    const proc = fnr('eval', pkg, fn, false, {FNR_TEST_WRITE_PAUSE: 'apply:c.yaml,undo:c.yaml', FNR_TEST_WRITE_FIFO: fifo})
    started.push(proc)
    expect(await nextStep(fifo, proc)).to.equal('apply:c.yaml')
    proc.kill('SIGTERM')
    expect(await nextStep(fifo, proc)).to.equal('undo:c.yaml')
    proc.kill('SIGINT')
    const r = await proc
    expect(r.exitCode, String(r.stderr)).to.equal(143)
    expect(String(r.stderr)).to.contain('restoring the package before exiting')
    expect(await snapshot(pkg)).to.deep.equal(before)
  })

  for (const [cmd, signal, code] of [
    ['eval', 'SIGTERM', 143],
    ['render', 'SIGINT', 130],
  ] as const) {
    it(`${cmd}: ${signal} during the parse of a large package stops the parse; exit ${code}, no function run, nothing written`, async () => {
      const {pkg, fn} = await makePackage('pkg')
      const big = Array.from({length: 2000}, (_, i) => `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c${i}\ndata:\n${'  k: v\n'.repeat(20)}`).join('---\n')
      await writeFile(path.join(pkg, 'big.yaml'), big)
      const fifo = path.join(dir, 'steps')
      await execa('mkfifo', [fifo])
      const before = await snapshot(pkg)
      const proc = fnr(cmd, pkg, fn, false, {FNR_TEST_WRITE_PAUSE: 'parse', FNR_TEST_WRITE_FIFO: fifo})
      started.push(proc)
      expect(await nextStep(fifo, proc)).to.equal('parse')
      proc.kill(signal)
      const r = await proc
      expect(r.exitCode, String(r.stderr)).to.equal(code)
      expect(String(r.stderr)).to.contain(`interrupted by ${signal}`)
      expect(String(r.stderr)).not.to.contain('[RUNNING]')
      expect(await snapshot(pkg)).to.deep.equal(before)
    })
  }
})
