/**
 * The process spawners (src/lib/process/spawner.ts, spawner-process.ts, native-spawner.ts and
 * native/fnr-spawn.c): servers start function processes through a small process of their own, so
 * forks of a large runner do not hold its event loop, and with the native helper
 * without forking a Node process at all (docs/process.md, "The native spawn helper"). A function started through either must behave
 * exactly as one started directly: the same output, stderr, exit status, limits, deadline and
 * cancellation, and errors. Every spec of the first block runs for each of the two.
 */
import {execFileSync, spawn, spawnSync} from 'node:child_process'
import {once} from 'node:events'
import {existsSync, readdirSync, readFileSync, readlinkSync} from 'node:fs'
import {chmod} from 'node:fs/promises'
import path from 'node:path'

import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import {runFunctionProcess, type FunctionProcessOptions, type FunctionProcessResult} from '../../src/lib/process/run.js'
import {nativeHelperPath, nativeSpawnerCommand} from '../../src/lib/process/native-spawner.js'
import {HELPER_START_WAIT_MS, ProcessLauncher} from '../../src/lib/process/launcher.js'
import {ProcessSpawner, serverLaunchMode, type LaunchMode} from '../../src/lib/process/spawner.js'
import {CALL_MARKER_ENV} from '../../src/lib/process/sweep.js'
import {TempDirs, writeExecutable} from '../support/tmp.js'
import {isAlive, waitFor} from '../wrapper/support/process.js'

/** The two spawners: the Node one, and the native helper (built here first, as `npm run build` does); each kind's launcher. */
const KINDS = [
  {name: 'the Node spawner', mode: 'spawner', which: 'node', launcher: new ProcessLauncher('spawner')},
  {name: 'the native helper', mode: 'native', which: 'native', launcher: new ProcessLauncher('native')},
] as const
/** Functions started directly, the way each case is compared with. */
const directLauncher = new ProcessLauncher()
const launcherFor = (kind: (typeof KINDS)[number], mode: LaunchMode): ProcessLauncher => (mode === 'direct' ? directLauncher : kind.launcher)

/** Builds the native helper into dist/native/ when it is missing or older than its source. */
function buildHelper(): string {
  execFileSync(process.execPath, [path.resolve('scripts/build-native.mjs')], {stdio: 'inherit'})
  const helper = nativeHelperPath()
  if (!helper) throw new Error('the native helper was not built (no C compiler?)')
  return helper
}

/** Waits until a spawner is ready (calls before that start directly). */
async function spawnerReady(kind: (typeof KINDS)[number] = KINDS[0]): Promise<number> {
  kind.launcher.start(() => {})
  for (let i = 0; i < 200; i++) {
    const child = kind.launcher.launch({command: '/bin/true', args: [], env: {}})
    const viaSpawner = child.constructor.name !== 'ChildProcess'
    await once(child, 'close')
    if (viaSpawner) return kind.launcher.spawnerPid(kind.which)!
    await new Promise((r) => setTimeout(r, 25))
  }
  throw new Error(`${kind.name} did not become ready`)
}

function parentOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'latin1')
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
}

/** The pid a function wrote to `file` (`echo $$ > file`), once it has; `all`: every pid on its line. */
async function pidFrom(file: string): Promise<number>
async function pidFrom(file: string, all: true): Promise<number[]>
async function pidFrom(file: string, all = false): Promise<number | number[]> {
  const read = (): string => {
    try {
      const text = readFileSync(file, 'utf8')
      return text.endsWith('\n') ? text.trim() : ''
    } catch {
      return ''
    }
  }
  await waitFor(() => read() !== '', `the function to write ${file}`)
  const pids = read().split(/\s+/).map(Number)
  return all ? pids : pids[0]!
}

after(async () => {
  for (const l of [directLauncher, ...KINDS.map((k) => k.launcher)]) await l.close()
})

for (const kind of KINDS) describe(`process spawner, ${kind.name}: functions started through it behave as started directly`, function () {
  this.timeout(60_000)
  const temp = new TempDirs()
  let dir: string
  const MODES: LaunchMode[] = ['direct', kind.mode]
  before(async () => {
    if (kind.mode === 'native') buildHelper()
    dir = await temp.make('fnr-spawner-')
    await spawnerReady(kind)
  })
  after(() => temp.cleanup())

  const run = (mode: LaunchMode, o: Partial<FunctionProcessOptions> & {command: string}): Promise<FunctionProcessResult> =>
    runFunctionProcess({input: Buffer.from('kind: ResourceList\n'), maxStdoutBytes: 8 * 1024 * 1024, label: 'fn', launcher: launcherFor(kind, mode), ...o})

  const outcome = async (p: Promise<FunctionProcessResult>): Promise<unknown> => {
    try {
      const r = await p
      return {stdout: r.stdout.toString('base64'), stderr: r.stderr.toString(), exitCode: r.exitCode, signal: r.signal, stderrDropped: r.stderrDropped}
    } catch (err) {
      return {kind: (err as FnrError).kind, message: (err as FnrError).message}
    }
  }

  const CASES: Record<string, (mode: LaunchMode) => Promise<FunctionProcessResult>> = {
    'stdin to stdout, 5 MiB each way': (mode) => run(mode, {command: '/bin/cat', input: Buffer.alloc(5 * 1024 * 1024, 0x61)}),
    'stderr, exit code 3': (mode) => run(mode, {command: '/bin/sh', args: ['-c', 'cat >/dev/null; echo oops >&2; echo half; exit 3']}),
    'killed by a signal': (mode) => run(mode, {command: '/bin/sh', args: ['-c', 'kill -TERM $$']}),
    'does not read its input (EPIPE on stdin)': (mode) => run(mode, {command: '/bin/sh', args: ['-c', 'echo done'], input: Buffer.alloc(4 * 1024 * 1024)}),
    'the environment, exactly, with the call marker': (mode) =>
      run(mode, {command: '/usr/bin/env', env: {A: '1', 'a.b': 'dotted', EMPTY: ''}}).then((r) => ({...r, stdout: Buffer.from(r.stdout.toString().replace(new RegExp(`^${CALL_MARKER_ENV}=.*$`, 'm'), `${CALL_MARKER_ENV}=…`))})),
    'the working directory': (mode) => run(mode, {command: '/bin/pwd', cwd: '/usr'}),
    'stdout over the cap': (mode) => run(mode, {command: '/bin/sh', args: ['-c', 'head -c 3000000 /dev/zero'], maxStdoutBytes: 1_000_000}),
    'stderr over its cap keeps the tail': (mode) => run(mode, {command: '/bin/sh', args: ['-c', 'i=0; while [ $i -lt 2000 ]; do echo line $i >&2; i=$((i+1)); done'], maxStderrBytes: 1000}),
    'executable not found': (mode) => run(mode, {command: '/nonexistent/fn'}),
    'permission denied': (mode) => run(mode, {command: path.join(dir, 'not-executable')}),
    'deadline': (mode) => run(mode, {command: '/bin/sleep', args: ['30'], deadline: Date.now() + 300}),
    // The native helper searches the PATH and falls back to /bin/sh in its child, as execvp does.
    'found on the function\'s PATH': (mode) => run(mode, {command: 'env-here', env: {PATH: `/nonexistent:${dir}`}}),
    'not found on the function\'s PATH': (mode) => run(mode, {command: 'no-such-function', env: {PATH: `/nonexistent:${dir}`}}),
    'only a non-executable file of that name on the PATH': (mode) => run(mode, {command: 'not-executable', env: {PATH: dir}}),
    'a script without #! runs in /bin/sh': (mode) => run(mode, {command: path.join(dir, 'no-shebang'), args: ['one', 'two']}),
    'a working directory that does not exist': (mode) => run(mode, {command: '/bin/pwd', cwd: path.join(dir, 'gone')}),
    'no signal ignored or blocked (the helper ignores SIGPIPE, SIGTERM and more itself)': (mode) => run(mode, {command: '/bin/grep', args: ['-E', '^Sig(Ign|Blk)', '/proc/self/status']}),
  }

  before(async () => {
    await chmod(await writeExecutable(path.join(dir, 'not-executable'), '#!/bin/sh\necho hi\n'), 0o644)
    await writeExecutable(path.join(dir, 'env-here'), '#!/bin/sh\necho "found: $0"\n')
    await writeExecutable(path.join(dir, 'no-shebang'), 'echo "sh ran: $# $1 $2"\n')
  })

  for (const [name, make] of Object.entries(CASES)) {
    it(`the same outcome either way: ${name}`, async () => {
      const [direct, spawned] = [await outcome(make('direct')), await outcome(make(kind.mode))]
      expect(spawned).to.deep.equal(direct)
    })
  }

  // The one difference: Node's spawn (directly, and in the Node spawner) gives socketpairs; the
  // native helper gives pipes, as Go's os/exec does in kpt and Porch's runner, so /dev/stdin,
  // /dev/stdout and /dev/stderr open and `[ -p /dev/stdin ]` holds.
  it(kind.mode === 'native' ? 'gives the function pipes as its stdio (Go\'s os/exec does): /dev/stdin, /dev/stdout and /dev/stderr open, 5 MiB each way' : 'gives the function socketpairs as its stdio, as Node\'s spawn does', async () => {
    const script = 'for f in 0 1 2; do readlink /proc/$$/fd/$f | cut -d: -f1 >&2; done; cat /dev/stdin > /dev/stdout; echo said > /dev/stderr'
    const input = Buffer.alloc(5 * 1024 * 1024, 0x62)
    const r = await run(kind.mode, {command: '/bin/sh', args: ['-c', script], input})
    if (kind.mode === 'native') {
      expect({exitCode: r.exitCode, stderr: r.stderr.toString()}).to.deep.equal({exitCode: 0, stderr: 'pipe\npipe\npipe\nsaid\n'})
      expect(Buffer.compare(r.stdout, input)).to.equal(0)
    } else {
      expect(r.stderr.toString()).to.match(/^socket\nsocket\nsocket\n/)
      expect(r.exitCode).to.not.equal(0)
    }
  })

  if (kind.mode === 'native') {
    it('gives a large input\'s stdin and stdout pipes of 256 KiB, a small one\'s the default 64 KiB (F_GETPIPE_SZ in the function)', async () => {
      // perl (Debian's essential perl-base) reads each descriptor's pipe size: fcntl F_GETPIPE_SZ (1032).
      const sizes = async (bytes: number): Promise<string> => {
        const r = await run('native', {command: 'perl', args: ['-e', 'my @s = map { fcntl($_, 1032, 0) + 0 } (*STDIN, *STDOUT, *STDERR); local $/; my $in = <STDIN>; print STDERR "@s"'], input: Buffer.alloc(bytes, 0x63)})
        return r.stderr.toString()
      }
      expect(await sizes(100)).to.equal('65536 65536 65536')
      expect(await sizes(200_000)).to.equal('262144 262144 65536')
    })
  }

  it('a call cancelled while its function runs ends Cancelled and the function is gone', async () => {
    for (const mode of MODES) {
      const abort = new AbortController()
      const pidFile = path.join(dir, `cancel-${mode}.pid`)
      const call = run(mode, {command: '/bin/sh', args: ['-c', `echo $$ > ${pidFile}; exec sleep 30`], signal: abort.signal}).catch((e: unknown) => e)
      const pid = await pidFrom(pidFile)
      abort.abort()
      expect(((await call) as FnrError).kind, mode).to.equal('Cancelled')
      await waitFor(() => !isAlive(pid), `${mode}: the function to die`)
    }
  })

  it('functions that exit before their stdin is handed over (killed at once, or quick): each call ends at once, none waits for descriptors', async () => {
    // The spawner hands descriptors over one at a time, and Node closes a child's stdin the moment
    // it exits: with 60 starts queued, most functions exit before their stdin is sent, and the
    // message comes without it. Calls waited STDIO_ARRIVAL_TIMEOUT_MS (10 s) for it, then failed.
    const quick = Array.from({length: 60}, () => run(kind.mode, {command: '/bin/sh', args: ['-c', 'echo out; echo err >&2; exit 4'], input: Buffer.alloc(0)}))
    const results = await Promise.all(quick)
    for (const r of results) expect({stdout: r.stdout.toString(), stderr: r.stderr.toString(), exitCode: r.exitCode}).to.deep.equal({stdout: 'out\n', stderr: 'err\n', exitCode: 4})
    const cancelled = Array.from({length: 60}, () => {
      const abort = new AbortController()
      const call = run(kind.mode, {command: '/bin/sleep', args: ['30'], signal: abort.signal}).catch((e: unknown) => e)
      setImmediate(() => abort.abort())
      return call
    })
    for (const e of await Promise.all(cancelled)) expect((e as FnrError).kind, String(e)).to.equal('Cancelled')
  })

  it('starts it in the spawner: the function is its child, not the runner\'s', async () => {
    const spawnerPid = await spawnerReady(kind)
    const r = await run(kind.mode, {command: '/bin/sh', args: ['-c', 'cat /proc/$$/stat']})
    const stat = r.stdout.toString()
    expect(Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])).to.equal(spawnerPid)
    expect(parentOf(spawnerPid)).to.equal(process.pid)
  })

  it('many calls at once through it: more than it starts at once (they wait in the runner)', async () => {
    // 400 calls: at most 128 are being started at once, the others wait in the runner for a place.
    const inputs = Array.from({length: 400}, (_, i) => Buffer.from(`kind: ResourceList\n# ${i}\n`.repeat(100 + (i % 64))))
    const results = await Promise.all(inputs.map((input) => run(kind.mode, {command: '/bin/cat', input})))
    results.forEach((r, i) => expect(r.stdout.equals(inputs[i]!)).to.equal(true))
  })

  it('input and output flow between the runner and the function directly: the spawner reads and writes none of it', async () => {
    const spawnerPid = await spawnerReady(kind)
    // Per thread: /proc/PID/io would add the I/O of the children it reaped (the function's own).
    const io = (): {read: number; written: number} => {
      const sum = {read: 0, written: 0}
      for (const tid of readdirSync(`/proc/${spawnerPid}/task`)) {
        const text = readFileSync(`/proc/${spawnerPid}/task/${tid}/io`, 'latin1')
        sum.read += Number(/^rchar: (\d+)/m.exec(text)![1])
        sum.written += Number(/^wchar: (\d+)/m.exec(text)![1])
      }
      return sum
    }
    const before = io()
    const input = Buffer.alloc(16 * 1024 * 1024, 0x62)
    const r = await run(kind.mode, {command: '/bin/cat', input, maxStdoutBytes: 32 * 1024 * 1024})
    expect(r.stdout.equals(input)).to.equal(true)
    const after = io()
    // Only the channel's few messages pass through it (a few hundred bytes), not 16 MiB each way.
    expect(after.read - before.read).to.be.below(64 * 1024)
    expect(after.written - before.written).to.be.below(64 * 1024)
  })

  it('has no listening socket: its only sockets are connected and unnamed, and no other process can reach it', async () => {
    const spawnerPid = await spawnerReady(kind)
    // A function running meanwhile: its stdio are pairs the spawner handed over.
    const pidFile = path.join(dir, 'listening.pid')
    const abort = new AbortController()
    const call = run(kind.mode, {command: '/bin/sh', args: ['-c', `echo $$ > ${pidFile}; exec sleep 30`], signal: abort.signal}).catch((e: unknown) => e)
    await pidFrom(pidFile)
    const inodes = new Set<string>()
    for (const fd of readdirSync(`/proc/${spawnerPid}/fd`)) {
      const target = (() => {
        try {
          return readlinkSync(`/proc/${spawnerPid}/fd/${fd}`)
        } catch {
          return ''
        }
      })()
      const m = /^socket:\[(\d+)\]$/.exec(target)
      if (m) inodes.add(m[1]!)
    }
    // /proc/net/unix: Num RefCount Protocol Flags Type St Inode [Path]; Flags 00010000 is a listening socket.
    const own = readFileSync('/proc/net/unix', 'latin1').split('\n').slice(1).map((line) => line.trim().split(/\s+/)).filter((f) => inodes.has(f[6]!))
    expect(own.length, 'the spawner has its IPC channel').to.be.greaterThan(0)
    // Another local user finds nothing to connect to: no socket of the spawner is named anywhere.
    const named = own.filter((f) => f[7] !== undefined).map((f) => f[7]!)
    for (const name of named) {
      const out = execFileSync('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', process.execPath, '-e', `require('net').connect({path: ${JSON.stringify(name.replace(/^@/, '\0'))}}).on('connect', () => { console.log('connected'); process.exit() }).on('error', (e) => { console.log(e.code); process.exit() })`], {encoding: 'utf8'})
      expect(out.trim()).to.not.equal('connected')
    }
    for (const f of own) {
      expect(Number.parseInt(f[3]!, 16) & 0x10000, `socket ${f[6]} listens`).to.equal(0)
      expect(f[5], `socket ${f[6]} is not connected`).to.equal('03')
      expect(f[7], `socket ${f[6]} has a name another process could connect to`).to.equal(undefined)
    }
    abort.abort()
    expect(((await call) as FnrError).kind).to.equal('Cancelled')
  })

  it('out of file descriptors in the spawner: UNAVAILABLE saying so, the other calls go through, and it recovers', async () => {
    const spawnerPid = await spawnerReady(kind)
    // The soft limit only (raising it back needs no privilege).
    const limit = (n: number): void => void execFileSync('prlimit', [`--pid=${spawnerPid}`, `--nofile=${n}:`])
    const before = Number(/^Max open files\s+(\d+)/m.exec(readFileSync(`/proc/${spawnerPid}/limits`, 'latin1'))![1])
    // Room for a few calls' descriptors beyond what it holds now, not for 60 at once. The native
    // helper closes its copies as soon as they are sent, one call at a time: it is given room for
    // less than one call's six (every call is refused, then).
    limit(readdirSync(`/proc/${spawnerPid}/fd`).length + (kind.mode === 'native' ? 4 : 8))
    try {
      const inputs = Array.from({length: 60}, (_, i) => Buffer.from(`kind: ResourceList\n# ${i}\n`))
      const outcomes = await Promise.all(inputs.map((input) => run(kind.mode, {command: '/bin/cat', input}).then((r) => r.stdout, (e: unknown) => e as FnrError)))
      const failed = outcomes.filter((o): o is FnrError => o instanceof FnrError)
      expect(failed.length, 'calls refused').to.be.greaterThan(0)
      for (const e of failed) {
        expect(e.kind).to.equal('Unavailable')
        expect(e.message).to.match(/^cannot start function "fn" \(\/bin\/cat\): the runner's process spawner is out of file descriptors \(EMFILE\); retry later$/)
      }
      outcomes.forEach((o, i) => {
        if (!(o instanceof FnrError)) expect(o.equals(inputs[i]!)).to.equal(true)
      })
      expect(kind.launcher.spawnerPid(kind.which)).to.equal(spawnerPid)
    } finally {
      limit(before)
    }
    const r = await run(kind.mode, {command: '/bin/cat', input: Buffer.from('fine again\n')})
    expect(r.stdout.toString()).to.equal('fine again\n')
  })

  it('a spawner that dies fails the calls it ran with UNAVAILABLE, kills their functions, and is started again', async () => {
    const spawnerPid = await spawnerReady(kind)
    const pidFile = path.join(dir, 'orphan.pid')
    const call = run(kind.mode, {command: '/bin/sh', args: ['-c', `echo $$ > ${pidFile}; exec sleep 30`]}).catch((e: unknown) => e)
    const fn = await pidFrom(pidFile)
    process.kill(spawnerPid, 'SIGKILL')
    const err = (await call) as FnrError
    expect(err.kind).to.equal('Unavailable')
    expect(err.message).to.match(/process spawner was killed by SIGKILL; retry the call/)
    await waitFor(() => !isAlive(fn), 'the function to die')
    const next = await spawnerReady(kind)
    expect(next).to.not.equal(spawnerPid)
    expect(kind.launcher.spawnerUsable(kind.which)).to.equal(true)
  })

  /**
   * A runner in a child process (SIGKILL-able) that, once its spawner is ready, starts `calls`
   * calls of `fn` through it; resolves with the runner and its spawner's pid.
   */
  async function runnerStarting(fn: string, calls = 1): Promise<{runner: ReturnType<typeof spawn>; spawnerPid: number}> {
    const script = `
      import {ProcessLauncher} from ${JSON.stringify(path.resolve('src/lib/process/launcher.ts'))}
      import {runFunctionProcess} from ${JSON.stringify(path.resolve('src/lib/process/run.ts'))}
      const launcher = new ProcessLauncher(${JSON.stringify(kind.mode)}).start(() => {})
      const ready = setInterval(() => {
        const child = launcher.launch({command: '/bin/true', args: [], env: {}})
        if (child.constructor.name === 'ChildProcess') return
        clearInterval(ready)
        for (let i = 0; i < ${calls}; i++) void runFunctionProcess({command: ${JSON.stringify(fn)}, input: Buffer.alloc(0), maxStdoutBytes: 1024, label: 'fn', launcher})
        console.log(launcher.spawnerPid(${JSON.stringify(kind.which)}))
      }, 50)
    `
    const runner = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {stdio: ['ignore', 'pipe', 'inherit']})
    const [line] = (await once(runner.stdout!, 'data')) as [Buffer]
    return {runner, spawnerPid: Number(line.toString().trim())}
  }

  it('exits when its runner is killed (SIGKILL), and kills the functions still running and what they started', async () => {
    const pidFile = path.join(dir, 'killed-runner.pids')
    // The function leaves a child in its process group, then waits.
    const fn = await writeExecutable(path.join(dir, 'long-fn'), `#!/bin/sh\nsleep 60 &\necho "$$ $!" > ${pidFile}\nexec sleep 60\n`)
    const {runner, spawnerPid} = await runnerStarting(fn)
    const [fnPid, childPid] = (await pidFrom(pidFile, true)) as number[]
    expect(parentOf(fnPid!)).to.equal(spawnerPid)
    runner.kill('SIGKILL')
    await waitFor(() => !isAlive(spawnerPid), 'the spawner to exit', 10_000)
    await waitFor(() => !isAlive(fnPid!) && !isAlive(childPid!), 'the function and its child to be killed', 10_000)
  })

  it('a runner killed (SIGKILL) while it is starting many functions leaves none of them running', async () => {
    // The native helper confirms each start after its exec, and what it holds is killed when its
    // runner goes: the starts confirmed, those still being confirmed (one confirmed just as the
    // runner died was dropped from its tables before it was handed over: tracked first since).
    const pidFile = path.join(dir, 'burst.pids')
    const fn = await writeExecutable(path.join(dir, 'burst-fn'), `#!/bin/sh\necho $$ >> ${pidFile}\nexec sleep 60\n`)
    const {runner, spawnerPid} = await runnerStarting(fn, 60)
    // Some functions have started, others are being started.
    const recorded = (): number[] => (existsSync(pidFile) ? readFileSync(pidFile, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number) : [])
    await waitFor(() => recorded().length > 0, 'a first function to start', 10_000)
    runner.kill('SIGKILL')
    await waitFor(() => !isAlive(spawnerPid), 'the spawner to exit', 10_000)
    const pids = recorded()
    await waitFor(() => pids.every((pid) => !isAlive(pid)), `every function started to be killed (${pids.filter(isAlive).join(' ')} alive)`, 10_000)
  })

  if (kind.mode === 'native') {
    it('starts functions without copying itself (a vfork-style clone from a spawn thread): the helper takes no page fault per start', async () => {
      // A fork copies the helper's page tables, and the helper then faults on every page it writes
      // while the child shares it: ~8 minor faults per start (measured with the forking helper of
      // 2026-12-01). A clone that shares its memory until the child's exec takes none.
      const helperPid = await spawnerReady(kind)
      const minorFaults = (): number => Number(readFileSync(`/proc/${helperPid}/stat`, 'latin1').split(') ')[1]!.split(' ')[7])
      await Promise.all(Array.from({length: 20}, () => run(kind.mode, {command: '/bin/cat', input: Buffer.from('warm\n')})))
      const before = minorFaults()
      const starts = 200
      for (let i = 0; i < starts / 8; i++) {
        const results = await Promise.all(Array.from({length: 8}, (_, k) => run(kind.mode, {command: '/bin/cat', input: Buffer.from(`call ${i}.${k}\n`)})))
        results.forEach((r, k) => expect(r.stdout.toString()).to.equal(`call ${i}.${k}\n`))
      }
      const perStart = (minorFaults() - before) / starts
      expect(perStart, `${perStart} minor faults per start`).to.be.below(1)
    })

    it('is a child subreaper: a daemon a function left in a session of its own is re-parented to it, and killed when its runner is killed', async () => {
      const pidFile = path.join(dir, 'orphan.pids')
      // A double fork into a new session: the subshell exits at once, the daemon loses its parent.
      const fn = await writeExecutable(path.join(dir, 'orphaning-fn'), `#!/bin/sh\n( setsid sleep 61 </dev/null >/dev/null 2>&1 & echo "$$ $!" > ${pidFile} )\nexec sleep 60\n`)
      const {runner, spawnerPid: helperPid} = await runnerStarting(fn)
      const [fnPid, daemonPid] = (await pidFrom(pidFile, true)) as number[]
      await waitFor(() => parentOf(daemonPid!) === helperPid, 'the daemon to be re-parented to the helper', 10_000)
      runner.kill('SIGKILL')
      await waitFor(() => !isAlive(helperPid), 'the helper to exit', 10_000)
      await waitFor(() => !isAlive(fnPid!) && !isAlive(daemonPid!), 'the function and the daemon it left to be killed', 10_000)
    })
  }
})

describe('process spawner: when it cannot run', function () {
  this.timeout(30_000)

  it('servers use the native helper when it is built, else the Node spawner from a memory limit of 256 MiB (it costs ~16 MiB); FNR_SPAWNER=off|on|node|native decides over that', () => {
    const MiB = 1024 * 1024
    const helper = '/x/dist/native/fnr-spawn'
    expect(serverLaunchMode(1024 * MiB, {}, null)).to.equal('spawner')
    expect(serverLaunchMode(256 * MiB, {}, null)).to.equal('spawner')
    expect(serverLaunchMode(255 * MiB, {}, null)).to.equal('direct')
    expect(serverLaunchMode(1024 * MiB, {FNR_SPAWNER: 'off'}, null)).to.equal('direct')
    expect(serverLaunchMode(128 * MiB, {FNR_SPAWNER: 'on'}, null)).to.equal('spawner')
    expect(serverLaunchMode(1024 * MiB, {}, helper)).to.equal('native')
    expect(serverLaunchMode(128 * MiB, {}, helper)).to.equal('native')
    expect(serverLaunchMode(128 * MiB, {FNR_SPAWNER: 'on'}, helper)).to.equal('native')
    expect(serverLaunchMode(1024 * MiB, {FNR_SPAWNER: 'node'}, helper)).to.equal('spawner')
    expect(serverLaunchMode(1024 * MiB, {FNR_SPAWNER: 'off'}, helper)).to.equal('direct')
    expect(serverLaunchMode(1024 * MiB, {FNR_SPAWNER: 'native'}, null)).to.equal('native')
    // The default looks for the helper, unless FNR_SPAWN_HELPER says there is none.
    expect(serverLaunchMode(1024 * MiB, {FNR_SPAWN_HELPER: 'none'})).to.equal('spawner')
    expect(serverLaunchMode(1024 * MiB, {FNR_SPAWN_HELPER: '/nonexistent/fnr-spawn'})).to.equal('spawner')
    expect(serverLaunchMode(1024 * MiB, {FNR_SPAWN_HELPER: buildHelper()})).to.equal('native')
  })

  it('a native helper that cannot be run: the server falls back to the Node spawner and says so once', async () => {
    // A runner of its own: the process's native spawner is given up for good once it failed.
    const script = `
      import {serverLaunchMode} from ${JSON.stringify(path.resolve('src/lib/process/spawner.ts'))}
      import {ProcessLauncher} from ${JSON.stringify(path.resolve('src/lib/process/launcher.ts'))}
      import {once} from 'node:events'
      const launcher = new ProcessLauncher(serverLaunchMode(2 ** 30)).start((m) => console.log('warn: ' + m))
      const mode = launcher.mode
      for (let i = 0; i < 200; i++) {
        const child = launcher.launch({command: '/bin/sh', args: ['-c', 'echo $PPID'], env: {}})
        let out = ''
        child.once('spawn', () => child.stdout.on('data', (d) => (out += d)))
        await once(child, 'close')
        // Until the Node spawner is ready, calls start directly (the first one waited for the helper and was told it failed).
        if (Number(out) === launcher.spawnerPid('node')) {
          console.log(JSON.stringify({mode, native: launcher.spawnerUsable('native'), parentIsNodeSpawner: true}))
          process.exit(0)
        }
        await new Promise((r) => setTimeout(r, 25))
      }
    `
    const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      encoding: 'utf8',
      env: {...process.env, FNR_SPAWNER: 'native', FNR_SPAWN_HELPER: '/nonexistent/fnr-spawn'},
    })
    const lines = out.trim().split('\n')
    expect(lines.filter((l) => l.startsWith('warn: '))).to.deep.equal([
      'warn: the process spawner could not be started (spawn /nonexistent/fnr-spawn ENOENT); functions are started through the Node process spawner',
    ])
    expect(JSON.parse(lines.at(-1)!)).to.deep.equal({mode: 'native', native: false, parentIsNodeSpawner: true})
  })

  it('the build without a C compiler says so once and goes on (servers then use the Node spawner)', async () => {
    const temp = new TempDirs()
    try {
      const out = path.join(await temp.make('fnr-native-build-'), 'fnr-spawn')
      const r = spawnSync(process.execPath, [path.resolve('scripts/build-native.mjs'), '--out', out], {encoding: 'utf8', env: {PATH: '/nonexistent'}})
      expect(r.status, r.stderr).to.equal(0)
      expect(r.stderr).to.equal('build: no C compiler (cc) found: the native spawn helper is not built; servers start functions through the Node spawner\n')
      expect(nativeHelperPath({FNR_SPAWN_HELPER: out})).to.equal(undefined)
    } finally {
      await temp.cleanup()
    }
  })

  it('the native helper answers malformed requests (on its stdin) with `failed` (EINVAL) and keeps serving', async () => {
    const c = spawn(buildHelper(), [], {stdio: ['pipe', 'inherit', 'inherit', 'ipc'], serialization: 'json'})
    try {
      const got: {t: string; id?: number; code?: string}[] = []
      c.on('message', (m: {t: string; id?: number; code?: string}, handle?: {destroy(): void}) => {
        got.push(m)
        handle?.destroy()
      })
      const b = (parts: string[]): string => Buffer.from(parts.join('\0')).toString('base64')
      const requests = [
        {id: 1, b: ''},
        {id: 2, b: '!!!!'},
        {id: 3, b: b(['', '/bin/true', '99', '/bin/true', ''])},
        {id: 4, b: Buffer.from('no NUL at the end').toString('base64')},
        {id: 5, b: b(['', '/bin/true', '-1', ''])},
        {id: 6, b: b(['', 'true', '1', 'true', 'PATH=/nonexistent:/bin', ''])},
      ]
      for (const r of requests) c.stdin!.write(`${JSON.stringify({t: 'spawn', ...r})}\n`)
      c.stdin!.write(`${JSON.stringify({t: 'something else'})}\n`)
      // What comes on the channel is not a request: a spawn sent there starts nothing.
      c.send({t: 'spawn', id: 7, b: Buffer.from(['', '/bin/true', '1', '/bin/true', ''].join('\0')).toString('base64')})
      await waitFor(() => got.some((m) => m.t === 'exit' && m.id === 6), 'the good request to run')
      expect(got.filter((m) => m.t === 'failed').map((m) => [m.id, m.code])).to.deep.equal([1, 2, 3, 4, 5].map((id) => [id, 'EINVAL']))
      expect(got.filter((m) => m.id === 6).map((m) => m.t)).to.deep.equal(['spawned', 'stdio', 'stdio', 'stdio', 'exit'])
      expect(got.filter((m) => m.id === 7)).to.deep.equal([])
      expect(c.exitCode).to.equal(null)
      // Its request pipe closed (the runner gone): it exits.
      c.stdin!.end()
      await waitFor(() => c.exitCode !== null, 'the helper to exit when its requests end')
      expect(c.exitCode).to.equal(0)
    } finally {
      c.kill('SIGKILL')
    }
  })

  it('the native helper started without its channel says what it is for', () => {
    const helper = buildHelper()
    const r = spawnSync(helper, [], {encoding: 'utf8', env: {}})
    expect(r.status).to.equal(2)
    expect(r.stderr).to.match(/started without its IPC channel/)
    expect(nativeSpawnerCommand().execPath).to.equal(helper)
  })

  it('calls start directly meanwhile, and after three failed starts it is given up, once, with the reason', async () => {
    const told: string[] = []
    const spawner = new ProcessSpawner(() => ({execPath: process.execPath, args: ['-e', 'process.exit(7)'], env: {}}))
    spawner.onDisabled = (why) => told.push(why)
    for (let i = 0; i < 50 && spawner.usable(); i++) {
      expect(spawner.launch({command: '/bin/true', args: [], env: {}})).to.equal(undefined)
      await new Promise((r) => setTimeout(r, 50))
    }
    expect(spawner.usable()).to.equal(false)
    expect(told).to.have.length(1)
    expect(told[0]).to.match(/process spawner exited with code 7, 3 times in a row; functions are now started directly by the runner/)
    expect(spawner.launch({command: '/bin/true', args: [], env: {}})).to.equal(undefined)
  })

  it('a call made in the native helper\'s first milliseconds waits for it: the first function of a new launcher gets pipes too', async () => {
    buildHelper()
    const launcher = new ProcessLauncher('native').start(() => {})
    try {
      const r = await runFunctionProcess({input: Buffer.from('in'), maxStdoutBytes: 1024, label: 'fn', launcher, command: '/bin/sh', args: ['-c', 'readlink /proc/$$/fd/0 | cut -d: -f1; cat /dev/stdin']})
      expect({exitCode: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString()}).to.deep.equal({exitCode: 0, stdout: 'pipe\nin', stderr: ''})
      expect(launcher.spawnerPid('native')).to.be.a('number')
    } finally {
      await launcher.close()
    }
  })

  it('a call waiting for a native helper that cannot be run starts without it, at once', async () => {
    const launcher = new ProcessLauncher('native')
    const env = process.env.FNR_SPAWN_HELPER
    process.env.FNR_SPAWN_HELPER = '/nonexistent/fnr-spawn'
    try {
      launcher.start(() => {})
      const started = Date.now()
      const r = await runFunctionProcess({input: Buffer.from('in'), maxStdoutBytes: 1024, label: 'fn', launcher, command: '/bin/cat'})
      expect({exitCode: r.exitCode, stdout: r.stdout.toString()}).to.deep.equal({exitCode: 0, stdout: 'in'})
      expect(Date.now() - started).to.be.lessThan(HELPER_START_WAIT_MS)
      expect(launcher.spawnerUsable('native')).to.equal(false)
    } finally {
      if (env === undefined) delete process.env.FNR_SPAWN_HELPER
      else process.env.FNR_SPAWN_HELPER = env
      await launcher.close()
    }
  })

  it('descriptors lost on the way (Node drops a descriptor message it cannot take in): the call fails UNAVAILABLE at the function\'s exit, not after 10 s', async () => {
    // A stand-in spawner that says a function started and exited, and sends no descriptor: what the
    // runner sees when Node answered NODE_HANDLE_NACK for all three (it was out of descriptors).
    const fake = `process.stdin.on('data', (d) => { const m = JSON.parse(d); process.send({t: 'spawned', id: m.id, pid: 999999}); process.send({t: 'exit', id: m.id, code: 0, signal: null}) }); process.send({t: 'ready'})`
    const spawner = new ProcessSpawner(() => ({execPath: process.execPath, args: ['-e', fake], env: {}}))
    let child: ReturnType<ProcessSpawner['launch']>
    await waitFor(() => (child = spawner.launch({command: '/bin/true', args: [], env: {}})) !== undefined, 'the stand-in spawner to be ready')
    const [err] = (await once(child!, 'error')) as [FnrError]
    expect(err.kind).to.equal('Unavailable')
    expect(err.message).to.equal("the function's stdio was lost on its way from the runner's process spawner (the runner may be out of file descriptors); retry the call")
  })

  it('an executable that cannot be run is given up at once', () => {
    const told: string[] = []
    const spawner = new ProcessSpawner(() => ({execPath: '/nonexistent/node', args: [], env: {}}))
    spawner.onDisabled = (why) => told.push(why)
    expect(spawner.launch({command: '/bin/true', args: [], env: {}})).to.equal(undefined)
    return waitFor(() => !spawner.usable(), 'the spawner to be given up').then(() => expect(told).to.have.length(1))
  })
})
