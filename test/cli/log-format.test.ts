/**
 * --log-format=json|text: JSON lines by default in pipes (pods, CI), one readable line per message
 * on a terminal (a real pty through script(1)), $FNR_LOG_FORMAT and the flag override the default.
 */
import {expect} from 'chai'
import {execa} from 'execa'
import {spawn} from 'node:child_process'
import {once} from 'node:events'
import path from 'node:path'

import {setLogFormat} from '../../src/lib/telemetry/log.js'
import {runCli} from '../support/cli.js'
import {BIN_RUN, REPO_ROOT} from '../support/serve.js'

const TEXT_LINE = /^\[\d\d:\d\d:\d\d\.\d\d\d\] [A-Z]+ \(fnr-[a-z-]+\): .+$/

/** `fnr serve` until its ready line (in either format), then SIGTERM: its stderr. */
async function serveReadyLine(args: string[], env: NodeJS.ProcessEnv = {}): Promise<string> {
  const child = spawn(process.execPath, [BIN_RUN, 'serve', '--port=0', '--disable-runtimes=pod', ...args], {
    env: {...process.env, FNR_BIND_ADDRESS: '127.0.0.1', ...env},
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  const exited = once(child, 'exit')
  let err = ''
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`fnr serve did not become ready:\n${err}`)), 30_000)
      child.stderr.on('data', (c: Buffer) => {
        err += c.toString()
        if (/fnr serve is ready.*\n/.test(err)) {
          clearTimeout(timer)
          resolve()
        }
      })
      void exited.then(() => {
        clearTimeout(timer)
        reject(new Error(`fnr serve exited before it was ready:\n${err}`))
      })
    })
  } finally {
    child.kill('SIGTERM')
    await exited
  }
  return err.split('\n').find((l) => l.includes('fnr serve is ready'))!
}

describe('--log-format', function () {
  this.timeout(60_000)
  afterEach(() => setLogFormat(undefined))

  it('a real terminal gets coloured text lines, NO_COLOR plain text; a pipe gets JSON', async () => {
    const script = `import {createLogger} from ${JSON.stringify(path.join(REPO_ROOT, 'dist', 'lib', 'telemetry', 'log.js'))}; createLogger({verbosity: 2, name: 'fnr-serve'}).info('hello', {port: 1})`
    const node = `${process.execPath} --input-type=module -e ${JSON.stringify(script).replace(/\$/g, '\\$')}`
    const onTty = async (env: Record<string, string>): Promise<string> =>
      String((await execa('script', ['-qec', node, '/dev/null'], {env: {...env, TERM: 'xterm'}, extendEnv: true})).stdout)
    const coloured = await onTty({})
    expect(coloured).to.contain('\u001B[32mINFO\u001B[39m').and.to.contain('hello')
    const plain = (await onTty({NO_COLOR: '1'})).trim()
    expect(plain).to.match(TEXT_LINE).and.not.to.contain('\u001B[')
    const piped = await execa(process.execPath, ['--input-type=module', '-e', script])
    expect(JSON.parse(piped.stderr)).to.include({level: 'info', msg: 'hello', port: 1})
  })

  it('fnr serve: JSON in a pipe by default, text with --log-format=text or FNR_LOG_FORMAT=text', async () => {
    expect(JSON.parse(await serveReadyLine([]))).to.include({level: 'lifecycle', name: 'fnr-serve', msg: 'fnr serve is ready'})
    expect(await serveReadyLine(['--log-format=text'])).to.match(TEXT_LINE).and.to.match(/ LIFECYCLE \(fnr-serve\): fnr serve is ready \{"port":\d+/)
    expect(await serveReadyLine([], {FNR_LOG_FORMAT: 'text'})).to.match(TEXT_LINE)
    expect(JSON.parse(await serveReadyLine(['--log-format', 'json'], {FNR_LOG_FORMAT: 'text'}))).to.have.property('msg', 'fnr serve is ready')
  })

  it('is a flag of the commands that log, and a bad value is a usage error', async () => {
    for (const command of [['serve'], ['wrapper-server'], ['pods', 'gc'], ['pods', 'warm'], ['pods', 'ls']]) {
      expect((await runCli([...command, '--help'])).stdout, command.join(' ')).to.contain('--log-format=<option>')
    }
    expect((await runCli(['render', '--help'])).stdout).not.to.contain('--log-format')
    const bad = await runCli(['serve', '--log-format=yaml'])
    expect(bad.exitCode).to.equal(2)
    expect(bad.stderr).to.match(/^fnr: .*--log-format.*json, text/)
  })
})
