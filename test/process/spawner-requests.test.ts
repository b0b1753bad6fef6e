/**
 * The process spawner's pure parts (src/lib/process/spawner.ts, native-spawner.ts, launcher.ts):
 * the native helper's request encoding, the loader flags a spawner from sources gets, and what a
 * direct launcher says when the helper is missing. The spawners themselves run in ./spawner.test.ts.
 */
import {expect} from 'chai'

import {LARGE_INPUT_PIPE_BYTES, nativeRequest} from '../../src/lib/process/native-spawner.js'
import {ProcessLauncher} from '../../src/lib/process/launcher.js'
import {loaderFlags} from '../../src/lib/process/spawner.js'

describe('process spawner: requests, flags and the missing helper', () => {
  it('a server without the native helper says so once, with where it looked; not when another mode was asked for', () => {
    const told: string[] = []
    expect(new ProcessLauncher('direct').start((m) => told.push(m), {FNR_SPAWN_HELPER: '/nonexistent/fnr-spawn'}).mode).to.equal('direct')
    expect(told).to.deep.equal([
      'the native spawn helper is not there (/nonexistent/fnr-spawn; `npm run build` builds it where a C compiler is installed): functions are started directly by the runner',
    ])
    expect(new ProcessLauncher('direct').start((m) => told.push(m), {FNR_SPAWNER: 'off'}).mode).to.equal('direct')
    expect(told).to.have.length(1)
  })

  it('native helper requests: NUL-separated strings in base64, and a NUL byte throws as spawn does', () => {
    const r = nativeRequest(7, {command: '/bin/echo', args: ['a b', ''], env: {A: '1', SKIP: undefined, E: ''}, cwd: '/tmp'})
    expect(r.t).to.equal('spawn')
    expect(r.id).to.equal(7)
    expect(Buffer.from(r.b, 'base64').toString().split('\0')).to.deep.equal(['/tmp', '/bin/echo', '3', '/bin/echo', 'a b', '', 'A=1', 'E=', ''])
    expect(() => nativeRequest(1, {command: '/bin/echo', args: ['a\0b'], env: {}})).to.throw(TypeError).with.property('code', 'ERR_INVALID_ARG_VALUE')
    expect(() => nativeRequest(1, {command: '/bin/echo', args: [], env: {X: 'a\0'}})).to.throw(TypeError)
  })

  it('native helper requests ask for larger stdin and stdout pipes only for an input over 64 KiB', () => {
    const spec = {command: '/bin/cat', args: [], env: {}}
    expect(nativeRequest(1, spec)).to.not.have.property('s')
    expect(nativeRequest(1, {...spec, inputBytes: 64 * 1024})).to.not.have.property('s')
    expect(nativeRequest(1, {...spec, inputBytes: 64 * 1024 + 1}).s).to.equal(LARGE_INPUT_PIPE_BYTES)
    expect(LARGE_INPUT_PIPE_BYTES).to.equal(256 * 1024)
  })

  it('from sources, passes on only the runner\'s module loader flags', () => {
    expect(loaderFlags(['--import', 'tsx', '--input-type=module', '-e', 'code', '--import=x', '-r', 'y', '--max-old-space-size=100', '--loader'])).to.deep.equal(['--import', 'tsx', '--import=x', '-r', 'y'])
  })
})
