// The kpt shim that fnr test puts on case scripts' PATH (src/lib/fntest/scripts.ts): it starts processes, so it is an integration spec.
import {expect} from 'chai'
import {execa} from 'execa'
import path from 'node:path'

import {DEFAULT_IMAGE_PREFIX} from '../../src/lib/config/image-ref.js'
import {createKptShim, SHIM_REFUSED_EXIT} from '../../src/lib/fntest/scripts.js'

describe('fnr test: the kpt shim of case scripts', () => {
  const embedded = {configPath: '/x/config.yaml', functionsDir: '/x/functions', embedded: true, defaultImagePrefix: DEFAULT_IMAGE_PREFIX}
  // "fnr" here is printf, so the test sees the command line the shim builds.
  const fnr = ['/usr/bin/printf', '%s|']

  async function run(paths: typeof embedded, args: string[]) {
    const shim = await createKptShim(fnr, paths)
    try {
      return await execa(path.join(shim.dir, 'kpt'), args, {reject: false})
    } finally {
      await shim.remove()
    }
  }

  it('maps kpt fn eval and kpt fn render to fnr, arguments unchanged', async () => {
    expect((await run(embedded, ['fn', 'eval', '.', '--image', 'a b', '--', 'k=v'])).stdout).to.equal('eval|.|--image|a b|--|k=v|')
    expect((await run(embedded, ['fn', 'render', '-o', 'out'])).stdout).to.equal('render|-o|out|')
  })

  it('adds the run\'s exec config flags unless the script gives its own', async () => {
    const given = {configPath: 'map.yaml', functionsDir: 'bin', embedded: false, defaultImagePrefix: 'example.com/'}
    const abs = (p: string) => path.resolve(p)
    expect((await run(given, ['fn', 'eval', '.'])).stdout).to.equal(`eval|--config|${abs('map.yaml')}|--functions|${abs('bin')}|--default-image-prefix|example.com/|.|`)
    expect((await run(given, ['fn', 'eval', '.', '--config=other.yaml'])).stdout).to.equal('eval|.|--config=other.yaml|')
    // after --, words are the function's arguments
    expect((await run(given, ['fn', 'eval', '.', '--', '--config'])).stdout).to.match(/^eval\|--config\|/)
  })

  it('maps kpt fn source and sink to fnr source and sink, without the exec config flags', async () => {
    const given = {configPath: 'map.yaml', functionsDir: 'bin', embedded: false, defaultImagePrefix: 'example.com/'}
    expect((await run(given, ['fn', 'source', '.', '-o', 'unwrap'])).stdout).to.equal('source|.|-o|unwrap|')
    expect((await run(given, ['fn', 'sink', 'out'])).stdout).to.equal('sink|out|')
  })

  it('refuses every other kpt command with exit 127 and one line', async () => {
    for (const args of [['fn', 'doc'], ['pkg', 'get', 'x'], ['version'], []]) {
      const r = await run(embedded, args)
      expect(r.exitCode, args.join(' ')).to.equal(SHIM_REFUSED_EXIT)
      expect(r.stdout).to.equal('')
      expect(r.stderr).to.equal(`kpt (fnr test): 'kpt ${args.join(' ')}' is not available here: only 'kpt fn eval', 'render', 'source' and 'sink' run, through fnr`)
    }
  })
})
