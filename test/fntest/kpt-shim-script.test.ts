/**
 * src/lib/fntest/scripts.ts, in process: the text of the `kpt` shim `fnr test` puts on its case
 * scripts' PATH, and the file createKptShim writes. test/fntest/kpt-shim.test.ts runs the shim
 * (an integration spec); here the script is read, not run.
 */
import {readFile, stat} from 'node:fs/promises'
import {existsSync} from 'node:fs'
import path from 'node:path'

import {expect} from 'chai'

import {DEFAULT_IMAGE_PREFIX} from '../../src/lib/config/image-ref.js'
import {createKptShim, defaultFnrCommand, kptShimScript, SHIM_REFUSED_EXIT} from '../../src/lib/fntest/scripts.js'

const EMBEDDED = {configPath: '/x/config.yaml', functionsDir: '/x/functions', embedded: true, defaultImagePrefix: DEFAULT_IMAGE_PREFIX}
const FNR = ['/usr/bin/node', '/opt/fnr/bin/run.js']

describe('fntest/scripts: the kpt shim script', () => {
  it('is a sh script that maps eval/render and source/sink, and refuses the rest with 127', () => {
    const text = kptShimScript(FNR, EMBEDDED)
    const lines = text.split('\n')
    expect(lines[0]).to.equal('#!/bin/sh')
    expect(text.endsWith('\n')).to.equal(true)
    expect(SHIM_REFUSED_EXIT).to.equal(127)
    expect(lines).to.include('if [ "$1" = fn ] && { [ "$2" = eval ] || [ "$2" = render ]; }; then')
    expect(lines).to.include('if [ "$1" = fn ] && { [ "$2" = source ] || [ "$2" = sink ]; }; then')
    expect(lines.at(-2)).to.equal('exit 127')
    expect(lines.filter((l) => l.trim() === 'exec /usr/bin/node /opt/fnr/bin/run.js "$sub" "$@"')).to.have.length(2)
  })

  it('adds no exec config flags for the shipped functions and the default image prefix', () => {
    const text = kptShimScript(FNR, EMBEDDED)
    expect(text).not.to.include('--config')
    expect(text).not.to.include('own=')
  })

  it('adds --config and --functions as absolute paths for a given exec config, unless the script gives its own', () => {
    const text = kptShimScript(FNR, {configPath: 'map.yaml', functionsDir: 'bin', embedded: false, defaultImagePrefix: DEFAULT_IMAGE_PREFIX})
    expect(text).to.include(`  if [ -z "$own" ]; then exec /usr/bin/node /opt/fnr/bin/run.js "$sub" --config ${path.resolve('map.yaml')} --functions ${path.resolve('bin')} "$@"; fi\n`)
    expect(text).to.include('      --config|--config=*|--functions|--functions=*|--default-image-prefix|--default-image-prefix=*) own=1 ;;')
    expect(text).not.to.include('--default-image-prefix example')
  })

  it('adds --default-image-prefix alone when only the prefix differs', () => {
    const text = kptShimScript(FNR, {...EMBEDDED, defaultImagePrefix: 'example.com/fns/'})
    expect(text).to.include('"$sub" --default-image-prefix example.com/fns/ "$@"; fi')
    expect(text).not.to.match(/"\$sub" --config/)
  })

  it('shell-quotes a command and paths with spaces or quotes', () => {
    const text = kptShimScript(['/opt/my node/node', "/it's/run.js"], {configPath: '/a b/c.yaml', functionsDir: '/f', embedded: false, defaultImagePrefix: DEFAULT_IMAGE_PREFIX})
    expect(text).to.include(`exec '/opt/my node/node' "/it's/run.js" "$sub" "$@"`)
    expect(text).to.include(`--config '/a b/c.yaml' --functions /f`)
  })

  it('runs this installation\'s bin/run.js with this node by default', () => {
    const [node, script] = defaultFnrCommand()
    expect(node).to.equal(process.execPath)
    expect(path.basename(script!)).to.equal('run.js')
    expect(path.basename(path.dirname(script!))).to.equal('bin')
    expect(existsSync(script!)).to.equal(true)
  })
})

describe('fntest/scripts: createKptShim', () => {
  it('writes an executable kpt holding the script in a folder of its own, and removes the folder', async () => {
    const shim = await createKptShim(FNR, EMBEDDED)
    const file = path.join(shim.dir, 'kpt')
    try {
      expect(await readFile(file, 'utf8')).to.equal(kptShimScript(FNR, EMBEDDED))
      expect((await stat(file)).mode & 0o777).to.equal(0o755)
      expect(path.basename(shim.dir)).to.match(/^fnr-test-kpt-/)
    } finally {
      await shim.remove()
    }
    expect(existsSync(shim.dir)).to.equal(false)
    // removing twice is harmless
    await shim.remove()
  })
})
