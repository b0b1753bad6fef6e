/**
 * No debugger by signal (docs/process.md "No debugger by signal"): SIGUSR1 makes
 * a Node process open its inspector (127.0.0.1:9229 by default), through which any loopback
 * neighbour could run code as the runner. `fnr serve`, `fnr wrapper-server`, the packaged wrapper
 * and the spawner each of them starts must take the signal without opening a listener, and keep
 * serving.
 *
 * A listener is looked for in two ways: a listening TCP socket held by the process that it did not
 * hold before the signal (/proc/<pid>/fd against /proc/net/tcp{,6}), and Node's own "Debugger
 * listening" / "Starting inspector … failed" line on the stderr the process shares with its server.
 * The servers run with NODE_OPTIONS (FNRW_OPTIONS for the packaged copy) --inspect-port=0, so an
 * inspector, if one opened, would take a free port rather than collide on 9229. The control, a
 * plain Node process, shows that both detectors see an inspector open.
 */
import {expect} from 'chai'
import {spawn, type ChildProcess} from 'node:child_process'
import {once} from 'node:events'
import {mkdir, readFile, readdir, readlink} from 'node:fs/promises'
import path from 'node:path'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {makeFunctionsDir, startServeProcess, type ServeProcess} from '../support/serve.js'
import {SAMPLE_RL, TempDirs} from '../support/tmp.js'
import {writeShellFunctions} from '../wrapper/support/functions.js'
import {copyFolder, packagedFolder, PACKAGE_TIMEOUT_MS} from '../wrapper/support/package.js'
import {isAlive, startWrapperProcess, waitFor, type Frontend, type WrapperProcess} from '../wrapper/support/process.js'

const INSPECTOR_LINE = /Debugger listening|Starting inspector/

/** TCP ports on which the process holds a listening socket. */
async function listeningPorts(pid: number): Promise<Set<number>> {
  const inodes = new Set<string>()
  for (const fd of await readdir(`/proc/${pid}/fd`).catch(() => [])) {
    const target = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '')
    const m = /^socket:\[(\d+)\]$/.exec(target)
    if (m) inodes.add(m[1]!)
  }
  const ports = new Set<number>()
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    const text = await readFile(table, 'latin1').catch(() => '')
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/)
      // local_address is ADDR:PORT in hex; st 0A is LISTEN; the inode is the tenth column.
      if (cols[3] === '0A' && inodes.has(cols[9] ?? '')) ports.add(Number.parseInt(cols[1]!.split(':')[1]!, 16))
    }
  }
  return ports
}

/** True once the process catches or ignores SIGUSR1 (signal 10: bit 9 of SigCgt/SigIgn in /proc/<pid>/status). */
async function takesUsr1(pid: number): Promise<boolean> {
  const status = await readFile(`/proc/${pid}/status`, 'latin1').catch(() => '')
  const mask = (name: string): bigint => BigInt(`0x${new RegExp(`^${name}:\\s*([0-9a-f]+)$`, 'm').exec(status)?.[1] ?? '0'}`)
  return ((mask('SigCgt') | mask('SigIgn')) & (1n << 9n)) !== 0n
}

/** The direct children of a process. */
async function childrenOf(pid: number): Promise<number[]> {
  const text = await readFile(`/proc/${pid}/task/${pid}/children`, 'latin1').catch(() => '')
  return text.trim().split(/\s+/).filter(Boolean).map(Number)
}

/** The process's spawner: its one child while no call runs. */
async function spawnerOf(pid: number): Promise<number> {
  let found: number[] = []
  await waitFor(async () => (found = await childrenOf(pid)).length === 1, `the spawner of ${pid}`)
  return found[0]!
}

/**
 * Sends SIGUSR1 to `pid`, then checks that a call is still served, and that for a while no new
 * listening socket appears in the process and no inspector line on `stderr()`. Resolves with what
 * was seen, for the caller's expectations.
 */
async function usr1(pid: number, stderr: () => string, call: () => Promise<void>): Promise<{newPorts: number[]; inspectorLine: boolean}> {
  // Until Node has set up its signal handling, SIGUSR1's default action would end the process.
  await waitFor(async () => takesUsr1(pid), `process ${pid} to catch or ignore SIGUSR1`)
  const before = await listeningPorts(pid)
  const errBefore = stderr().length
  process.kill(pid, 'SIGUSR1')
  await call()
  const seen = {newPorts: [] as number[], inspectorLine: false}
  // An inspector opens within milliseconds of the signal; watch for one well past that.
  const until = Date.now() + 1500
  while (Date.now() < until && seen.newPorts.length === 0 && !seen.inspectorLine) {
    seen.newPorts = [...(await listeningPorts(pid))].filter((p) => !before.has(p))
    seen.inspectorLine = INSPECTOR_LINE.test(stderr().slice(errBefore))
    await new Promise((r) => setTimeout(r, 50))
  }
  return seen
}

describe('no debugger by signal: SIGUSR1 opens no inspector', function () {
  this.timeout(120_000)
  const temp = new TempDirs()
  const children: ChildProcess[] = []
  after(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL')
    await temp.cleanup()
  })

  it('control: a plain Node process does open one on SIGUSR1 (the detectors work)', async () => {
    // It says when it runs JavaScript: by then Node has its SIGUSR1 handler.
    const child = spawn(process.execPath, ['-e', 'console.error("up"); setInterval(() => {}, 1000)'], {env: {...process.env, NODE_OPTIONS: '--inspect-port=0'}, stdio: ['ignore', 'ignore', 'pipe']})
    children.push(child)
    let err = ''
    child.stderr!.on('data', (c: Buffer) => (err += c.toString()))
    await waitFor(() => err.includes('up'), 'the control process to start')
    expect((await listeningPorts(child.pid!)).size).to.equal(0)
    process.kill(child.pid!, 'SIGUSR1')
    await waitFor(async () => (await listeningPorts(child.pid!)).size > 0 && INSPECTOR_LINE.test(err), 'the control to open its inspector')
    child.kill('SIGKILL')
    await once(child, 'exit')
  })

  describe('fnr serve and its spawner', () => {
    let serve: ServeProcess
    let client: EvaluatorClient
    const call = async (): Promise<void> => {
      const res = await client.evaluateRaw('example.com/cat:v1', SAMPLE_RL, {deadline: Date.now() + 30_000})
      expect(res.resourceList.equals(SAMPLE_RL)).to.equal(true)
    }
    before(async () => {
      const dir = await temp.make('fnr-usr1-serve-')
      const {configPath, functionsDir} = await makeFunctionsDir(dir)
      serve = await startServeProcess([`--config=${configPath}`, `--functions=${functionsDir}`, '--disable-runtimes=pod'], {NODE_OPTIONS: '--inspect-port=0'})
      children.push(serve.child)
      client = new EvaluatorClient(`127.0.0.1:${serve.port}`)
      await call()
    })
    after(async () => {
      client?.close()
      serve?.child.kill('SIGTERM')
      await serve?.exited
    })

    it('fnr serve runs with --expose-gc and --disable-sigusr1 on its command line (bin/run.js re-ran itself with them, same pid)', async () => {
      const argv = (await readFile(`/proc/${serve.child.pid}/cmdline`, 'utf8')).split('\0')
      expect(argv).to.include.members(['--expose-gc', '--disable-sigusr1', 'serve'])
    })

    it('fnr serve: no listener, still serving', async () => {
      const seen = await usr1(serve.child.pid!, serve.stderr, call)
      expect(seen).to.deep.equal({newPorts: [], inspectorLine: false})
      expect(isAlive(serve.child.pid!)).to.equal(true)
    })

    it('its spawner: no listener, and calls still start through it', async () => {
      const spawner = await spawnerOf(serve.child.pid!)
      const seen = await usr1(spawner, serve.stderr, call)
      expect(seen).to.deep.equal({newPorts: [], inspectorLine: false})
      expect(await childrenOf(serve.child.pid!)).to.deep.equal([spawner])
    })
  })

  for (const frontend of ['cli', 'packaged'] as Frontend[]) {
    describe(`the wrapper-server (${frontend}) and its spawner`, () => {
      let wrapper: WrapperProcess
      let client: EvaluatorClient
      const call = async (): Promise<void> => {
        const res = await client.evaluateRaw('x', SAMPLE_RL, {deadline: Date.now() + 30_000})
        expect(res.resourceList.equals(SAMPLE_RL)).to.equal(true)
      }
      before(async function () {
        if (frontend === 'packaged') this.timeout(PACKAGE_TIMEOUT_MS)
        const dir = await temp.make('fnr-usr1-wrapper-')
        const sh = await writeShellFunctions(path.join(dir, 'sh'))
        let folder: string | undefined
        if (frontend === 'packaged') {
          folder = path.join(dir, 'tools')
          await mkdir(folder)
          copyFolder(await packagedFolder(), folder)
        }
        wrapper = await startWrapperProcess(frontend, ['--port=0', '--', sh.cat], {folder, env: {NODE_OPTIONS: '--inspect-port=0', FNRW_OPTIONS: '--inspect-port=0'}})
        client = new EvaluatorClient(wrapper.address)
        await call()
      })
      after(async () => {
        client?.close()
        await wrapper?.kill()
      })

      it('the wrapper: no listener, still serving', async () => {
        const seen = await usr1(wrapper.child.pid!, wrapper.stderr, call)
        expect(seen).to.deep.equal({newPorts: [], inspectorLine: false})
        expect(isAlive(wrapper.child.pid!)).to.equal(true)
      })

      it('its spawner: no listener, and calls still start through it', async () => {
        const spawner = await spawnerOf(wrapper.child.pid!)
        const seen = await usr1(spawner, wrapper.stderr, call)
        expect(seen).to.deep.equal({newPorts: [], inspectorLine: false})
        expect(await childrenOf(wrapper.child.pid!)).to.deep.equal([spawner])
      })
    })
  }
})
