/**
 * The wrapper as PID 1 reaps zombies (docs/process.md "How zombies are reaped").
 *
 * The packaged folder is mounted at /wrapper-server-tools in real containers (runc: their own pid
 * namespace and /proc), and the container runs Porch's template command,
 * `/wrapper-server-tools/wrapper-server --port … -- FUNCTION`, as a non-root user in an image
 * with only static busybox. The function leaves orphans on every call: a double fork (re-parented
 * to PID 1 at once) and a setsid daemon (killed by the end-of-call sweep, then re-parented). The
 * launcher (PID 1) must reap them all; a control container that runs the executable itself as
 * PID 1 and the Node spawner shows the zombies the check would catch (with the native helper, a
 * child subreaper, the orphans are its children, and it reaps them even then). Also: the
 * container's environment reaches the
 * function unchanged (names a shell would drop included), the health probe, SIGTERM draining with
 * exit 0, the second SIGTERM's exit 1, and the launcher's cost (printed).
 * Skipped, with the reason printed, only where runc cannot run containers (as runc.test.ts).
 */
import {expect} from 'chai'
import path from 'node:path'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {restoreLauncherEnvironment, LAUNCHER_ENVIRON} from '../../src/lib/wrapper.js'
import {SAMPLE_RL} from '../support/tmp.js'
import {markedInput} from './support/functions.js'
import {waitFor} from './support/process.js'
import {useRuncBed} from './support/runc-bed.js'
import {makeRootfs, RuncContainer} from './support/runc.js'

const LAUNCHER = '/wrapper-server-tools/wrapper-server'
const SEA = '/wrapper-server-tools/wrapper-server-sea'
const PROBE = '/wrapper-server-tools/grpc-health-probe'
const NONROOT = {uid: 65532, gid: 65532}
const IMAGE = 'example.com/orphans:v1'

/** Leaves two orphans per call; "# mode=slow" takes 1 s, "# mode=hang" 60 s, "# mode=environ" prints its environment as the kernel gave it. */
const ORPHANS_FUNCTION = `#!/bin/sh
( sleep 0.2 & )
f=/tmp/daemon.$$
setsid sh -c ': > "$1"; exec sleep 30' x "$f" </dev/null >/dev/null 2>&1 &
while [ ! -e "$f" ]; do sleep 0.01; done
rm -f "$f"
input=$(cat)
case "$input" in
  *"# mode=slow"*) sleep 1 ;;
  *"# mode=hang"*) sleep 60 & wait ;;
  *"# mode=environ"*) echo "kind: ResourceList"; tr '\\0' '\\n' < /proc/$$/environ | sed 's/^/# /'; exit 0 ;;
esac
printf '%s\\n' "$input"
`

interface Proc {
  pid: number
  comm: string
  state: string
  ppid: number
}

/** The container's processes, from its own /proc (zombies included), without the exec'd reader. */
function processes(c: RuncContainer): Proc[] {
  const r = c.exec(['/bin/sh', '-c', 'cat /proc/[0-9]*/stat; echo "self $$"'])
  if (r.code !== 0) throw new Error(`reading /proc in the container failed: ${r.stderr}`)
  const self = Number(/^self (\d+)$/m.exec(r.stdout)?.[1])
  const procs: Proc[] = []
  for (const line of r.stdout.split('\n')) {
    const m = /^(\d+) \((.*)\) (\S) (\d+) /.exec(line)
    if (m) procs.push({pid: Number(m[1]), comm: m[2]!, state: m[3]!, ppid: Number(m[4])})
  }
  // the reader: the exec'd sh and its cat
  return procs.filter((p) => p.pid !== self && p.ppid !== self)
}

const zombies = (procs: Proc[]): Proc[] => procs.filter((p) => p.state === 'Z')
const show = (procs: Proc[]): string => procs.map((p) => `${p.pid}:${p.comm}:${p.state}:ppid=${p.ppid}`).join(' ')

function status(c: RuncContainer, pid: number, field: string): number {
  const r = c.exec(['/bin/cat', `/proc/${pid}/status`])
  return Number(new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(r.stdout)?.[1])
}

describe('the packaged wrapper as PID 1 reaps zombies (runc, Porch\'s template command)', function () {
  this.timeout(180_000)
  const bed = useRuncBed('fnr-reaper-')
  let n = 0

  const start = async (args: string[], env: string[] = []): Promise<{c: RuncContainer; readyMs: number}> => {
    const bundle = path.join(bed.work, `c${++n}`)
    await makeRootfs(path.join(bundle, 'rootfs'), {busybox: 'applets', files: {'usr/local/bin/orphans': {content: ORPHANS_FUNCTION, mode: 0o755}}})
    const started = performance.now()
    const c = bed.track(await RuncContainer.start({bundle, tools: bed.tools, args, env: ['FNR_BIND_ADDRESS=127.0.0.1', 'PATH=/bin', 'HOME=/', ...env], user: NONROOT, tmpfs: ['/tmp']}, bed.state))
    const readyMs = performance.now() - started
    return {c, readyMs}
  }
  const porchArgs = (entry: string): string[] => [entry, '--port', '0', '--max-request-body-size', '6291456', '--', '/usr/local/bin/orphans']
  const client = (c: RuncContainer): EvaluatorClient => {
    const e = new EvaluatorClient(c.address)
    return bed.closeLater(e)
  }
  /** Six calls, three of them at once; each leaves two orphans. */
  const sixCalls = async (c: RuncContainer): Promise<void> => {
    const e = client(c)
    for (let i = 0; i < 3; i++) expect((await e.evaluateRaw(IMAGE, SAMPLE_RL)).resourceList.equals(SAMPLE_RL)).to.equal(true)
    const results = await Promise.all([0, 1, 2].map(() => e.evaluateRaw(IMAGE, SAMPLE_RL)))
    for (const r of results) expect(r.resourceList.equals(SAMPLE_RL)).to.equal(true)
  }
  /** Until no orphan is running any more (each is a zombie or gone). */
  const orphansDone = (c: RuncContainer): Promise<void> =>
    waitFor(() => processes(c).every((p) => p.comm !== 'sleep' || p.state === 'Z'), 'the orphans to exit or be killed')

  describe('the launcher (wrapper-server) as PID 1', () => {
    let c: RuncContainer
    let readyMs: number

    before(async () => {
      ;({c, readyMs} = await start(porchArgs(LAUNCHER)))
    })

    it('is PID 1 (a static busybox shell) and runs the executable as its child', () => {
      const procs = processes(c)
      const init = procs.find((p) => p.pid === 1)
      expect(init?.comm).to.equal('wrapper-server')
      const cmdline = c.exec(['/bin/cat', '/proc/1/cmdline']).stdout.split('\0')
      expect(cmdline.slice(0, 4)).to.deep.equal(['/wrapper-server-tools/busybox', 'sh', LAUNCHER, '--port'])
      const children = procs.filter((p) => p.ppid === 1)
      expect(children.map((p) => p.comm), show(procs)).to.deep.equal(['wrapper-server-'])
      expect(c.exec(['/bin/cat', `/proc/${children[0]!.pid}/cmdline`]).stdout.split('\0')[0]).to.equal(SEA)
    })

    it('leaves no zombie after six calls that each orphan a double fork and a setsid daemon', async () => {
      await sixCalls(c)
      await orphansDone(c)
      const procs = processes(c)
      expect(zombies(procs), show(procs)).to.deep.equal([])
      // nothing else left: the launcher, the executable and its process spawner (the native helper
      // the folder carries, docs/process.md "The native spawn helper")
      expect(procs.map((p) => p.comm).sort(), show(procs)).to.deep.equal(['fnr-spawn', 'wrapper-server', 'wrapper-server-'])
      const sea = procs.find((p) => p.ppid === 1)!
      const spawner = procs.find((p) => p.ppid === sea.pid)
      expect(spawner, show(procs)).to.not.equal(undefined)
      expect(c.exec(['/bin/cat', `/proc/${spawner!.pid}/environ`]).stdout.split('\0')).to.include('FNR_PROCESS_SPAWNER=1')
    })

    it('logs each call whose daemon escaped the process group (image, count)', async () => {
      await waitFor(() => (c.stderr().match(/escaped the call's process group/g) ?? []).length >= 6, 'six escape warnings')
      const warnings = c
        .stderr()
        .split('\n')
        .filter((l) => l.includes('escaped the call'))
        .map((l) => JSON.parse(l) as Record<string, unknown>)
      expect(warnings).to.have.length(6)
      for (const w of warnings) expect(w).to.include({level: 'warn', image: IMAGE, count: 1})
    })

    it('answers Porch\'s readiness probe command inside the container', () => {
      const r = c.exec([PROBE, '-addr', `localhost:${c.port}`], {user: NONROOT})
      expect(r.code, r.stderr).to.equal(0)
      expect(r.stderr).to.contain('status: SERVING')
    })

    it('costs little: prints the launcher\'s memory and the start-up times', async () => {
      const procs = processes(c)
      const sea = procs.find((p) => p.ppid === 1 && p.comm === 'wrapper-server-')!
      const launcherRss = status(c, 1, 'VmRSS')
      const seaRss = status(c, sea.pid, 'VmRSS')
      const direct = await start(porchArgs(SEA))
      console.log(`      launcher (PID 1) VmRSS ${launcherRss} kB, executable ${seaRss} kB; ready after ${readyMs.toFixed(0)} ms with the launcher, ${direct.readyMs.toFixed(0)} ms without (one container start each)`)
      expect(launcherRss).to.be.greaterThan(0)
      await direct.c.destroy()
    })

    it('on SIGTERM forwards it: the call in flight finishes, the wrapper drains and the container exits 0', async () => {
      const inFlight = client(c).evaluateRaw(IMAGE, markedInput('slow'))
      await waitFor(() => processes(c).some((p) => p.comm === 'orphans' || p.comm === 'sh'), 'the function to be running')
      c.signal('TERM')
      expect((await inFlight).resourceList.toString()).to.contain('# mode=slow')
      const {code} = await c.exited
      expect(code, c.stderr()).to.equal(0)
      expect(c.stderr()).to.match(/"msg":"draining"/)
      expect(c.stderr()).to.match(/"msg":"stopped"/)
    })
  })

  it('the second SIGTERM: the wrapper kills the function and exits 1, and so does the container', async () => {
    const {c} = await start(porchArgs(LAUNCHER))
    const call = client(c)
      .evaluateRaw(IMAGE, markedInput('hang'))
      .catch((e: unknown) => e)
    await waitFor(() => processes(c).some((p) => p.comm === 'sleep' && p.state !== 'Z' && p.ppid !== 1), 'the function to hang')
    c.signal('TERM')
    await new Promise((r) => setTimeout(r, 300))
    c.signal('TERM')
    const {code} = await c.exited
    expect(code, c.stderr()).to.equal(1)
    expect(c.stderr()).to.contain('second signal: exiting now')
    await call
  })

  it('hands the container\'s environment to the function unchanged (no PWD or SHLVL; names a shell drops kept)', async () => {
    const env = ['FROM_IMAGE=a b', 'a.b=dotted', 'x-y=dashed', 'NODE_OPTIONS=--require /app/tracing.js']
    const {c} = await start(porchArgs(LAUNCHER), env)
    const out = (await client(c).evaluateRaw(IMAGE, markedInput('environ'))).resourceList.toString()
    const got = out
      .split('\n')
      .filter((l) => l.startsWith('# '))
      .map((l) => l.slice(2))
      .filter((l) => !l.startsWith('FNR_FUNCTION_CALL='))
    expect(got.sort()).to.deep.equal(['FNR_BIND_ADDRESS=127.0.0.1', 'PATH=/bin', 'HOME=/', ...env].sort())
    expect(out).to.match(/^# FNR_FUNCTION_CALL=\d+\.\d+$/m)
  })

  it('control: the executable itself as PID 1, without the native helper, leaves the orphans as zombies (what the check above would catch)', async () => {
    // The Node spawner: the orphans go to PID 1 (the native helper is a subreaper: below).
    const {c} = await start(porchArgs(SEA), ['FNR_SPAWNER=node'])
    await sixCalls(c)
    await orphansDone(c)
    const procs = processes(c)
    const z = zombies(procs)
    console.log(`      without the launcher: ${z.length} zombies after six calls`)
    expect(z.length, show(procs)).to.be.at.least(6)
    expect(z.every((p) => p.ppid === 1 && p.comm === 'sleep'), show(z)).to.equal(true)
  })

  it('the executable itself as PID 1 with the native helper: the helper, a child subreaper, takes the orphans and reaps them', async () => {
    const {c} = await start(porchArgs(SEA))
    await sixCalls(c)
    await orphansDone(c)
    const procs = processes(c)
    expect(zombies(procs), show(procs)).to.deep.equal([])
    expect(procs.map((p) => p.comm).sort(), show(procs)).to.deep.equal(['fnr-spawn', 'wrapper-server-'])
  })
})

describe('restoreLauncherEnvironment', () => {
  it('replaces the environment with the launcher\'s original one (base64 of /proc/PID/environ) and drops the carrier', () => {
    const original = Buffer.from('A=1\0a.b=x=y\0EMPTY=\0A=second\0noequals\0\0', 'utf8')
    const env: NodeJS.ProcessEnv = {[LAUNCHER_ENVIRON]: original.toString('base64'), PWD: '/', SHLVL: '1', A: 'changed'}
    expect(restoreLauncherEnvironment(env)).to.equal(true)
    expect(env).to.deep.equal({A: '1', 'a.b': 'x=y', EMPTY: ''})
  })

  it('leaves the environment alone without the launcher', () => {
    const env: NodeJS.ProcessEnv = {PWD: '/', A: '1'}
    expect(restoreLauncherEnvironment(env)).to.equal(false)
    expect(env).to.deep.equal({PWD: '/', A: '1'})
  })

  it('restores an empty environment', () => {
    const env: NodeJS.ProcessEnv = {[LAUNCHER_ENVIRON]: '', PATH: '/sbin'}
    expect(restoreLauncherEnvironment(env)).to.equal(true)
    expect(env).to.deep.equal({})
  })
})
