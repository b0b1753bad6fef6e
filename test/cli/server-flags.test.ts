/**
 * How `fnr serve` gets its two Node flags (--expose-gc, --disable-sigusr1; docs/process.md "No
 * debugger by signal"). Run as a program (a shell's `fnr serve`, a pod whose command is
 * `fnr serve`), bin/run.js's first lines start Node with them: one Node start, flags from Node's
 * first instruction. `node bin/run.js serve` without them re-runs the process with them
 * (process.execve, same pid). Every Node start is counted by a module NODE_OPTIONS preloads.
 */
import {expect} from 'chai'
import {spawn} from 'node:child_process'
import {once} from 'node:events'
import {readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {BIN_RUN, makeFunctionsDir} from '../support/serve.js'
import {TempDirs} from '../support/tmp.js'

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

interface NodeStart {
  pid: number
  execArgv: string[]
  gc: string
}

describe('fnr serve: the server flags without a second Node start', function () {
  this.timeout(60_000)
  const temp = new TempDirs()
  after(() => temp.cleanup())

  /** Runs `command args…` until `fnr serve is ready` (or exit), then returns every Node start it made. */
  async function nodeStarts(command: string, args: string[], afterReady?: (pid: number, stderr: () => string) => Promise<void>): Promise<{starts: NodeStart[]; childPid: number; stderr: string}> {
    const dir = await temp.make('fnr-server-flags-')
    const {configPath, functionsDir} = await makeFunctionsDir(dir)
    const log = path.join(dir, 'starts.jsonl')
    const preload = path.join(dir, 'count.mjs')
    await writeFile(preload, `import {appendFileSync} from 'node:fs'\nappendFileSync(${JSON.stringify(log)}, JSON.stringify({pid: process.pid, execArgv: process.execArgv, gc: typeof globalThis.gc}) + '\\n')\n`)
    await writeFile(log, '')
    const serveArgs = args.includes('serve') ? ['--port=0', '--disable-runtimes=pod', `--config=${configPath}`, `--functions=${functionsDir}`] : []
    const child = spawn(command, [...args, ...serveArgs], {
      // `node` from PATH is this Node, as for a user whose PATH has it
      // (--inspect-port=0: an inspector, if one opened, would take a free port and say so on stderr)
      env: {...process.env, PATH: `${path.dirname(process.execPath)}${path.delimiter}${process.env.PATH ?? ''}`, NODE_OPTIONS: `--import=${preload} --inspect-port=0`, FNR_BIND_ADDRESS: '127.0.0.1'},
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stderr = ''
    child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()))
    child.stdout!.resume()
    const exited = once(child, 'exit')
    if (serveArgs.length > 0) {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`fnr serve was not ready in 30 s:\n${stderr}`)), 30_000)
        const check = (): void => {
          if (!stderr.includes('fnr serve is ready')) return
          clearTimeout(timer)
          resolve()
        }
        child.stderr!.on('data', check)
        void exited.then(() => reject(new Error(`fnr serve exited before it was ready:\n${stderr}`)))
      })
      await afterReady?.(child.pid!, () => stderr)
      child.kill('SIGTERM')
    }
    await exited
    const starts = (await readFile(log, 'utf8')).trim().split('\n').filter(Boolean).map((l) => JSON.parse(l) as NodeStart)
    return {starts, childPid: child.pid!, stderr}
  }

  it('run as a program, `fnr serve` starts Node once, with --expose-gc and --disable-sigusr1 from its start (gc is there); SIGUSR1 opens no inspector', async () => {
    let afterUsr1 = {alive: false, inspector: true}
    const {starts, childPid} = await nodeStarts(BIN_RUN, ['serve'], async (pid, stderr) => {
      process.kill(pid, 'SIGUSR1')
      // an inspector says so within milliseconds; watch well past that
      await new Promise((r) => setTimeout(r, 1000))
      afterUsr1 = {alive: isAlive(pid), inspector: /Debugger listening|Starting inspector/.test(stderr())}
    })
    expect(afterUsr1).to.deep.equal({alive: true, inspector: false})
    expect(starts).to.have.length(1)
    expect(starts[0]!.pid).to.equal(childPid)
    expect(starts[0]!.execArgv).to.include.members(['--expose-gc', '--disable-sigusr1'])
    expect(starts[0]!.gc).to.equal('function')
  })

  it('run as a program, another command starts Node once, without the server flags', async () => {
    const {starts, stderr} = await nodeStarts(BIN_RUN, ['--version'])
    expect(stderr).to.equal('')
    expect(starts).to.have.length(1)
    expect(starts[0]!.execArgv).not.to.include.members(['--expose-gc'])
    expect(starts[0]!.execArgv).not.to.include.members(['--disable-sigusr1'])
  })

  it('`node bin/run.js serve` without the flags re-runs itself with them (same pid, one more Node start)', async () => {
    const {starts, childPid} = await nodeStarts(process.execPath, [BIN_RUN, 'serve'])
    expect(starts.map((s) => s.pid)).to.deep.equal([childPid, childPid])
    expect(starts[0]!.execArgv).not.to.include.members(['--expose-gc'])
    expect(starts[1]!.execArgv).to.include.members(['--expose-gc', '--disable-sigusr1'])
    expect(starts[1]!.gc).to.equal('function')
  })

  it('`node --expose-gc --disable-sigusr1 bin/run.js serve` (the images) starts Node once', async () => {
    const {starts} = await nodeStarts(process.execPath, ['--expose-gc', '--disable-sigusr1', BIN_RUN, 'serve'])
    expect(starts).to.have.length(1)
    expect(starts[0]!.gc).to.equal('function')
  })
})
