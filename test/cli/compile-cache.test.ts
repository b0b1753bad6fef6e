/**
 * bin/run.js turns on Node's compile cache (module.enableCompileCache): V8's bytecode of the
 * modules a run loads is kept in <os.tmpdir()>/node-compile-cache and reused by later runs. It
 * replaced the V8 code cache that the build used to make for the `fnr eval` fast path.
 */
import {expect} from 'chai'
import {spawnSync} from 'node:child_process'
import {mkdir, readdir, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {BIN_RUN} from '../support/serve.js'
import {TempDirs} from '../support/tmp.js'

/** Files under a folder, recursively (none when it does not exist). */
async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, {recursive: true, withFileTypes: true}).catch(() => [])
  return entries.filter((e) => e.isFile()).map((e) => path.join(e.parentPath, e.name))
}

describe('bin/run.js: Node\'s compile cache', function () {
  this.timeout(60_000)
  const temp = new TempDirs()
  after(() => temp.cleanup())

  for (const [what, args] of [
    ['fnr eval (the fast path)', (pkg: string) => ['eval', '--input', pkg, '-o', 'stdout', '--exec', 'cat']],
    ['fnr image inspect --help (oclif)', () => ['image', 'inspect', '--help']],
  ] as const) {
    it(`${what} leaves its modules' bytecode in the OS temporary folder, and runs the same from it`, async () => {
      const dir = await temp.make('fnr-compile-cache-')
      const tmp = path.join(dir, 'tmp')
      const pkg = path.join(dir, 'pkg')
      await mkdir(tmp)
      await mkdir(pkg)
      await writeFile(path.join(pkg, 'cm.yaml'), 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n')
      const env: NodeJS.ProcessEnv = {...process.env, TMPDIR: tmp}
      delete env.NODE_COMPILE_CACHE
      delete env.NODE_DISABLE_COMPILE_CACHE
      const run = (): {status: number | null; stdout: string} => spawnSync(process.execPath, [BIN_RUN, ...args(pkg)], {env, encoding: 'utf8'})
      const first = run()
      expect(first.status).to.equal(0)
      const cached = await filesUnder(path.join(tmp, 'node-compile-cache'))
      expect(cached).to.have.length.greaterThan(0)
      const second = run()
      expect(second).to.deep.include({status: 0, stdout: first.stdout})
    })
  }
})
