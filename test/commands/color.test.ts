/** Colour on a terminal (a real pty through script(1)), never in pipes; NO_COLOR and --no-color turn it off. */
import {expect} from 'chai'
import {execa} from 'execa'
import {writeFile} from 'node:fs/promises'
import path from 'node:path'

import {runCli} from '../support/cli.js'
import {BIN_RUN} from '../support/serve.js'
import {TempDirs} from '../support/tmp.js'

describe('console colour', function () {
  this.timeout(60_000)
  const temp = new TempDirs()
  after(() => temp.cleanup())

  async function onTty(command: string, env: Record<string, string> = {}): Promise<string> {
    const r = await execa('script', ['-qec', command, '/dev/null'], {reject: false, env: {...env, TERM: 'xterm'}})
    return String(r.stdout)
  }

  it('colours kpt\'s tags on a terminal only, unless NO_COLOR or --no-color', async () => {
    const dir = await temp.make('fnr-color-')
    const file = path.join(dir, 'cm.yaml')
    await writeFile(file, 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n')
    const cmd = `${process.execPath} ${BIN_RUN} eval --exec cat --input ${file} -o unwrap`
    for (const fast of [{}, {FNR_NO_FAST_PATH: '1'}] as Array<Record<string, string>>) {
      expect(await onTty(cmd, fast)).to.contain('\u001B[32m[PASS]\u001B[0m')
      expect(await onTty(cmd, {...fast, NO_COLOR: '1'})).not.to.contain('\u001B[')
      expect(await onTty(`${cmd} --no-color`, fast)).not.to.contain('\u001B[')
    }
    const piped = await runCli(['eval', '--exec', 'cat', '--input', file, '-o', 'unwrap'])
    expect(piped.stderr).to.contain('[PASS]').and.not.to.contain('\u001B[')
  })
})
