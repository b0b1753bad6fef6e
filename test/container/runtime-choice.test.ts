/**
 * Choosing the container runtime without starting one (src/lib/container/runtime-select.ts): an
 * executable found on PATH (then the extra directories), the OCI runtime taken from PATH, `none`,
 * and a CLI that is not installed refused with what was tried. Probing a CLI runs it and is in the
 * integration suites (test/container/cli-runtime.test.ts).
 */
import {writeFile} from 'node:fs/promises'
import path from 'node:path'

import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import {findExecutable, ociUnusableReason, selectRuntime} from '../../src/lib/container/runtime-select.js'
import {TempDirs, writeExecutable} from '../support/tmp.js'

describe('container runtime: the choice', () => {
  const temp = new TempDirs()
  after(() => temp.cleanup())

  it('findExecutable: the first executable of that name on PATH, then in the extra directories; never a file that is not executable', async () => {
    const first = await temp.make('fnr-bin-')
    const second = await temp.make('fnr-bin-')
    const extra = await temp.make('fnr-bin-')
    await writeFile(path.join(first, 'tool'), '#!/bin/sh\n', {mode: 0o644})
    await writeExecutable(path.join(second, 'tool'), '#!/bin/sh\n')
    await writeExecutable(path.join(extra, 'other'), '#!/bin/sh\n')
    const env = {PATH: [first, '', second].join(path.delimiter)}
    expect(findExecutable('tool', env)).to.equal(path.join(second, 'tool'))
    expect(findExecutable('other', env)).to.equal(undefined)
    expect(findExecutable('other', env, [extra])).to.equal(path.join(extra, 'other'))
    expect(findExecutable('tool', {})).to.equal(undefined)
  })

  it('FNR_CONTAINER_RUNTIME=none chooses nothing; runc is taken from PATH when this machine can run it', async () => {
    expect(await selectRuntime({FNR_CONTAINER_RUNTIME: 'none'})).to.equal(undefined)
    const bin = await temp.make('fnr-bin-')
    await writeExecutable(path.join(bin, 'runc'), '#!/bin/sh\n')
    const why = ociUnusableReason('runc')
    if (why === undefined) {
      expect(await selectRuntime({FNR_CONTAINER_RUNTIME: 'runc', PATH: bin})).to.deep.equal({kind: 'oci', name: 'runc', path: path.join(bin, 'runc')})
    } else {
      const err = await selectRuntime({FNR_CONTAINER_RUNTIME: 'runc', PATH: bin}).catch((e: unknown) => e)
      expect((err as FnrError).message).to.contain(why)
    }
  })

  it('a CLI that is not installed is not usable, and the error says what was tried', async () => {
    const empty = await temp.make('fnr-bin-')
    const err = await selectRuntime({FNR_CONTAINER_RUNTIME: 'podman', PATH: empty}).catch((e: unknown) => e)
    expect(err).to.be.instanceOf(FnrError)
    expect((err as FnrError).kind).to.equal('FailedPrecondition')
    expect((err as FnrError).message).to.equal('FNR_CONTAINER_RUNTIME=podman is not usable to run image functions: podman: not installed (not on PATH)')
    expect((err as FnrError).details).to.deep.include({noRuntime: true})
  })

  it('OCI runtimes run on Linux, as root or where the kernel allows user namespaces', () => {
    const why = ociUnusableReason('crun')
    if (process.platform !== 'linux') expect(why).to.equal(`crun runs on Linux only (this is ${process.platform})`)
    else if (process.getuid?.() === 0) expect(why).to.equal(undefined)
    else expect(why === undefined || why.includes('user.max_user_namespaces')).to.equal(true)
  })
})
