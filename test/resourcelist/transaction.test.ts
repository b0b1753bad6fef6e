/**
 * Changing a package's files all or nothing (src/lib/resourcelist/transaction.ts), in a temporary
 * directory: creates, replaces (mode kept) and deletes applied together with no temporaries or
 * backups left; the checks that refuse a change before anything is touched; an interrupt before
 * the start; and the errors a path problem becomes. The interrupts between steps are driven from
 * a real process in the commands' suites (test/commands/inplace-failures.test.ts).
 */
import {chmod, readdir, readFile, stat, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import {afterPackageWrites, applyChanges, holdsPackageWrites, ioError, type FileChange} from '../../src/lib/resourcelist/transaction.js'
import {failure} from '../support/fnr-error.js'
import {TempDirs} from '../support/tmp.js'

/** Every file under `dir` (relative paths, sorted), with its content. */
async function tree(dir: string, rel = ''): Promise<Record<string, string>> {
  const out: Record<string, string> = {}
  for (const e of await readdir(path.join(dir, rel), {withFileTypes: true})) {
    const r = path.join(rel, e.name)
    if (e.isDirectory()) Object.assign(out, await tree(dir, r))
    else out[r] = await readFile(path.join(dir, r), 'utf8')
  }
  return out
}

describe('resourcelist: package changes all or nothing', () => {
  const temp = new TempDirs()
  after(() => temp.cleanup())

  async function pkg(): Promise<string> {
    const dir = await temp.make('fnr-tx-')
    await writeFile(path.join(dir, 'a.yaml'), 'a: old\n')
    await chmod(path.join(dir, 'a.yaml'), 0o640)
    await writeFile(path.join(dir, 'b.yaml'), 'b: old\n')
    await writeFile(path.join(dir, 'keep.yaml'), 'keep: me\n')
    return dir
  }

  it('applies creates (new directories too), replaces and deletes together, keeping the replaced file\'s mode and leaving nothing else behind', async () => {
    const dir = await pkg()
    const changes: FileChange[] = [
      {rel: 'a.yaml', target: path.join(dir, 'a.yaml'), action: 'replace', bytes: Buffer.from('a: new\n'), previous: Buffer.from('a: old\n')},
      {rel: 'b.yaml', target: path.join(dir, 'b.yaml'), action: 'delete'},
      {rel: 'sub/deep/c.yaml', target: path.join(dir, 'sub', 'deep', 'c.yaml'), action: 'create', bytes: Buffer.from('c: new\n'), mkdirs: [path.join(dir, 'sub'), path.join(dir, 'sub', 'deep')]},
      {rel: 'sub/d.yaml', target: path.join(dir, 'sub', 'd.yaml'), action: 'create', bytes: Buffer.from('d: new\n')},
    ]
    await applyChanges(changes)
    expect(await tree(dir)).to.deep.equal({'a.yaml': 'a: new\n', 'keep.yaml': 'keep: me\n', 'sub/deep/c.yaml': 'c: new\n', 'sub/d.yaml': 'd: new\n'})
    expect((await stat(path.join(dir, 'a.yaml'))).mode & 0o777).to.equal(0o640)
    expect(holdsPackageWrites()).to.equal(false)
  })

  it('refuses a change whose directory or file is missing before touching anything, naming the change', async () => {
    const dir = await pkg()
    const before = await tree(dir)
    const replace: FileChange = {rel: 'a.yaml', target: path.join(dir, 'a.yaml'), action: 'replace', bytes: Buffer.from('a: new\n')}
    const noDir = await failure(applyChanges([replace, {rel: 'x/y.yaml', target: path.join(dir, 'x', 'y.yaml'), action: 'create', bytes: Buffer.from('y: 1\n')}]))
    expect(noDir.kind).to.equal('InvalidArgument')
    expect(noDir.message).to.equal(`cannot create x/y.yaml: ${path.join(dir, 'x')}: no such file or directory (ENOENT)`)
    const gone = await failure(applyChanges([replace, {rel: 'gone.yaml', target: path.join(dir, 'gone.yaml'), action: 'delete'}]))
    expect(gone.message).to.equal(`cannot delete gone.yaml: ${path.join(dir, 'gone.yaml')}: no such file or directory (ENOENT)`)
    expect(await tree(dir)).to.deep.equal(before)
  })

  it('an interrupt before the changes start leaves the package untouched, with the signal\'s reason', async () => {
    const dir = await pkg()
    const before = await tree(dir)
    const abort = new AbortController()
    abort.abort(new FnrError('Cancelled', 'interrupted'))
    const err = await applyChanges([{rel: 'a.yaml', target: path.join(dir, 'a.yaml'), action: 'replace', bytes: Buffer.from('a: new\n')}], abort.signal).catch((e: unknown) => e)
    expect(err).to.be.instanceOf(FnrError)
    expect((err as FnrError).message).to.equal('interrupted')
    expect(await tree(dir)).to.deep.equal(before)
  })

  it('runs what waits for package writes at once when none is under way', () => {
    let ran = 0
    afterPackageWrites(() => ran++)
    expect(ran).to.equal(1)
  })

  it('path problems are InvalidArgument or PermissionDenied, a full disk ResourceExhausted, the rest Internal', () => {
    const errno = (code: string) => Object.assign(new Error(code), {code})
    expect(ioError('/p', errno('EACCES'))).to.deep.include({kind: 'PermissionDenied', message: '/p: permission denied (EACCES)'})
    expect(ioError('/p', errno('EPERM'))).to.deep.include({kind: 'PermissionDenied', message: '/p: permission denied (EPERM)'})
    expect(ioError('/p', errno('ENOSPC'))).to.deep.include({kind: 'ResourceExhausted', message: '/p: no space left on device (ENOSPC)'})
    expect(ioError('/p', errno('EDQUOT'))).to.deep.include({kind: 'ResourceExhausted', message: '/p: disk quota exceeded (EDQUOT)'})
    expect(ioError('/p', errno('ENOTDIR'))).to.deep.include({kind: 'InvalidArgument', message: '/p: a path component is not a directory (ENOTDIR)'})
    expect(ioError('/p', errno('EROFS'))).to.deep.include({kind: 'InvalidArgument', message: '/p: read-only file system (EROFS)'})
    expect(ioError('/p', errno('EIO'))).to.deep.include({kind: 'Internal', message: '/p: EIO'})
    expect(ioError('/p', new Error('odd'))).to.deep.include({kind: 'Internal', message: '/p: odd'})
    const already = new FnrError('Usage', 'as it was')
    expect(ioError('/p', already)).to.equal(already)
  })
})
