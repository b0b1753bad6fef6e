/**
 * The runc bed the packaged-wrapper container specs share (runc.test.ts, reaper.test.ts): a scratch folder, a
 * runc state root, the packaged folder copied to be mounted at /wrapper-server-tools, and cleanup of every
 * container and client a spec made. Registers its own before/after hooks in the describe that calls it; skipped,
 * with the reason printed, only where runc cannot run containers (never in CI, where that is an error).
 */
import {mkdir} from 'node:fs/promises'
import path from 'node:path'

import {TempDirs} from '../../support/tmp.js'
import {skipOutsideCi} from '../../support/skip.js'
import {copyFolder, packagedFolder, PACKAGE_TIMEOUT_MS} from './package.js'
import {probeRunc, type RuncContainer} from './runc.js'

export interface RuncBed {
  /** The scratch folder (bundles go below it). */
  readonly work: string
  /** runc's --root. */
  readonly state: string
  /** The packaged wrapper folder, to mount at /wrapper-server-tools. */
  readonly tools: string
  /** Destroys `c` after the describe. */
  track(c: RuncContainer): RuncContainer
  /** Closes `client` after the describe. */
  closeLater<T extends {close(): void}>(client: T): T
}

export function useRuncBed(prefix: string): RuncBed {
  const temp = new TempDirs()
  const containers: RuncContainer[] = []
  const clients: Array<{close(): void}> = []
  const dirs = {work: '', state: '', tools: ''}

  before(async function () {
    this.timeout(PACKAGE_TIMEOUT_MS)
    dirs.work = await temp.make(prefix)
    dirs.state = path.join(dirs.work, 'runc-state')
    await mkdir(dirs.state)
    const reason = await probeRunc(dirs.work, dirs.state)
    if (reason) skipOutsideCi(this, `runc: ${reason}`)
    dirs.tools = path.join(dirs.work, 'wrapper-server-tools')
    await mkdir(dirs.tools)
    copyFolder(await packagedFolder(), dirs.tools)
  })

  after(async () => {
    for (const c of clients.splice(0)) c.close()
    await Promise.all(containers.splice(0).map((c) => c.destroy()))
    await temp.cleanup()
  })

  return {
    get work() {
      return dirs.work
    },
    get state() {
      return dirs.state
    },
    get tools() {
      return dirs.tools
    },
    track(c) {
      containers.push(c)
      return c
    },
    closeLater(client) {
      clients.push(client)
      return client
    },
  }
}
