/** Shell completion (@oclif/plugin-autocomplete): the generated scripts know fnr's commands and flags. */
import {expect} from 'chai'
import {readFile} from 'node:fs/promises'
import path from 'node:path'

import {runCli} from '../support/cli.js'
import {TempDirs} from '../support/tmp.js'

describe('fnr autocomplete', function () {
  this.timeout(60_000)
  const temp = new TempDirs()
  after(() => temp.cleanup())

  it('prints setup instructions and builds bash and zsh completions with every command and their flags', async () => {
    const cache = await temp.make('fnr-ac-')
    const env = {XDG_CACHE_HOME: cache, HOME: cache}
    const r = await runCli(['autocomplete', 'bash'], {env})
    expect(r.exitCode, r.stderr).to.equal(0)
    expect(r.stdout).to.contain('fnr autocomplete script bash')
    const s = await runCli(['autocomplete', 'script', 'bash'], {env})
    expect(s.stdout).to.contain('FNR_AC_BASH_SETUP_PATH')
    const bash = await readFile(path.join(cache, 'fnr', 'autocomplete', 'functions', 'bash', 'fnr.bash'), 'utf8')
    for (const word of ['eval', 'render', 'test', 'serve', '--allow-exec', '--match-kind']) expect(bash, word).to.contain(word)
    const z = await runCli(['autocomplete', 'zsh'], {env})
    expect(z.exitCode, z.stderr).to.equal(0)
    const zsh = await readFile(path.join(cache, 'fnr', 'autocomplete', 'functions', 'zsh', '_fnr'), 'utf8')
    expect(zsh).to.contain('render')
  })
})
