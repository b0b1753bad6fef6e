/**
 * The packaged folder inside real containers (runc), mounted at /wrapper-server-tools as in a
 * function pod, in root filesystems that have no Node and no libc:
 *   - "static": only /busybox (a static binary) — a distroless/static-like image whose function
 *     is a single static executable, run as a non-root user;
 *   - "busybox": busybox applets in /bin and a #!/bin/sh function, plus a decoy glibc
 *     (garbage /lib64/ld-linux-x86-64.so.2, libc.so.6 and ld.so.cache) and LD_LIBRARY_PATH
 *     pointing at it, which the wrapper must not pick up.
 * Skipped, with the reason printed, only where runc cannot run containers (not root, no runc,
 * no static busybox, or a kernel/cgroup setup runc refuses).
 */
import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'
import path from 'node:path'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {readFailure} from '../../src/lib/grpc/metadata.js'
import {checkHealth, healthClient} from '../support/health.js'
import {SAMPLE_RL} from '../support/tmp.js'
import {CONFIGMAP_OLD_NS, MULTI_MODE_FUNCTION, markedInput} from './support/functions.js'
import {waitFor} from './support/process.js'
import {useRuncBed} from './support/runc-bed.js'
import {makeRootfs, RuncContainer} from './support/runc.js'

const WRAPPER = '/wrapper-server-tools/wrapper-server'
const PROBE = '/wrapper-server-tools/grpc-health-probe'
const NONROOT = {uid: 65532, gid: 65532}
const BIND = 'FNR_BIND_ADDRESS=127.0.0.1'

describe('packaged wrapper in containers without Node or libc (runc)', function () {
  this.timeout(180_000)
  const bed = useRuncBed('fnr-runc-')

  const start = async (name: string, rootfs: Parameters<typeof makeRootfs>[1], spec: {args: string[]; env?: string[]; user?: {uid: number; gid: number}; tmpfs?: string[]}, options: {waitForReady?: boolean} = {}) => {
    const bundle = path.join(bed.work, name)
    await makeRootfs(path.join(bundle, 'rootfs'), rootfs)
    return bed.track(await RuncContainer.start({bundle, tools: bed.tools, ...spec}, bed.state, options))
  }
  const client = (c: RuncContainer): EvaluatorClient => {
    const e = new EvaluatorClient(c.address)
    return bed.closeLater(e)
  }

  describe('image with only a static function binary, as a non-root user', () => {
    let c: RuncContainer

    before(async () => {
      c = await start('static', {busybox: 'only'}, {
        args: [WRAPPER, '--port', '0', '--max-request-body-size', '6291456', '--', '/busybox', 'cat'],
        env: [BIND],
        user: NONROOT,
      })
    })

    it('starts, serves EvaluateFunction and health over the host loopback', async () => {
      const res = await client(c).evaluateRaw('example.com/cat:v1', SAMPLE_RL)
      expect(res.resourceList.equals(SAMPLE_RL)).to.equal(true)
      const health = healthClient(c.address)
      bed.closeLater(health)
      expect(await checkHealth(health)).to.equal('SERVING')
    })

    it('answers Porch\'s readiness probe run inside the container (no /etc/hosts there)', () => {
      const r = c.exec([PROBE, '-addr', `localhost:${c.port}`], {user: NONROOT})
      expect(r.code, r.stderr).to.equal(0)
      expect(r.stderr).to.contain('status: SERVING')
    })

    it('runs concurrent calls without mixing them up', async () => {
      const inputs = Array.from({length: 8}, (_, i) => Buffer.from(`${SAMPLE_RL.toString()}# call ${i}\n`))
      const e = client(c)
      const results = await Promise.all(inputs.map((input) => e.evaluateRaw('x', input)))
      results.forEach((r, i) => expect(r.resourceList.equals(inputs[i]!)).to.equal(true))
    })

    it('exits 3 with a clear message when the pod gives no entrypoint', async () => {
      const bad = await start('no-entrypoint', {busybox: 'only'}, {args: [WRAPPER, '--port', '0'], env: [BIND]}, {waitForReady: false})
      const {code} = await bad.exited
      expect(code, bad.stderr()).to.equal(3)
      expect(bad.stderr().trim()).to.match(/^fnr: no function entrypoint/)
    })
  })

  describe('busybox image with a shell function and a decoy glibc', () => {
    let c: RuncContainer
    const decoy = {content: 'this is not an ELF file\n', mode: 0o755}

    before(async () => {
      c = await start(
        'busybox',
        {
          busybox: 'applets',
          files: {
            'usr/local/bin/function': {content: MULTI_MODE_FUNCTION, mode: 0o755},
            'lib64/ld-linux-x86-64.so.2': decoy,
            'lib/x86_64-linux-gnu/libc.so.6': decoy,
            'lib/x86_64-linux-gnu/libstdc++.so.6': decoy,
            'etc/ld.so.cache': decoy,
          },
        },
        {
          args: [WRAPPER, '--port', '0', '--max-request-body-size', '6291456', '--', '/usr/local/bin/function'],
          // NODE_OPTIONS as a Node-based function image might set it: meant for the function, not the wrapper.
          env: [BIND, 'PATH=/usr/local/bin:/bin', 'LD_LIBRARY_PATH=/lib/x86_64-linux-gnu', 'FROM_IMAGE=yes', 'NODE_OPTIONS=--require /app/tracing.js'],
          tmpfs: ['/tmp'],
        },
      )
    })

    it('runs the function with the image\'s shell and tools', async () => {
      const res = await client(c).evaluateRaw('example.com/set-namespace:v1', CONFIGMAP_OLD_NS)
      expect(res.resourceList.toString()).to.equal(CONFIGMAP_OLD_NS.toString().replace('namespace: old', 'namespace: new'))
    })

    it('gives the function the container\'s environment unchanged', async () => {
      const env = (await client(c).evaluateRaw('x', markedInput('env'))).resourceList.toString()
      expect(env).to.contain('# FROM_IMAGE=yes\n')
      expect(env).to.contain('# LD_LIBRARY_PATH=/lib/x86_64-linux-gnu\n')
      expect(env).to.contain('# PATH=/usr/local/bin:/bin\n')
      expect(env).to.contain('# NODE_OPTIONS=--require /app/tracing.js\n')
      // Nothing added by the wrapper but the call's marker (docs/process.md; HOME comes from runc,
      // PWD and SHLVL from the shell).
      const names = env.match(/^# [A-Z_]+(?==)/gm)!.map((n) => n.slice(2)).filter((n) => !['HOME', 'PWD', 'SHLVL'].includes(n))
      expect(names.sort()).to.deep.equal(['FNR_BIND_ADDRESS', 'FNR_FUNCTION_CALL', 'FROM_IMAGE', 'LD_LIBRARY_PATH', 'NODE_OPTIONS', 'PATH'])
    })

    it('reports a failure with the exit code, error results and stderr', async () => {
      const err = (await client(c).evaluateRaw('x', markedInput('fail')).catch((e: grpc.ServiceError) => e)) as grpc.ServiceError
      expect(err.code).to.equal(grpc.status.INTERNAL)
      expect(err.details).to.contain('exited with code 3')
      expect(err.details).to.match(/^\[error\]:? bad replicas$/m)
      expect(err.details).to.contain('fatal: from the container')
      const failure = readFailure(err.metadata)!
      expect(failure.exitCode).to.equal(3)
      expect(failure.results).to.deep.equal([{message: 'bad replicas', severity: 'error'}])
    })

    it('kills the whole process group at the deadline (nothing is left in the container but the wrapper)', async () => {
      const err = (await client(c).evaluateRaw('x', markedInput('hang'), {deadline: Date.now() + 1000}).catch((e: grpc.ServiceError) => e)) as grpc.ServiceError
      expect(err.code).to.equal(grpc.status.DEADLINE_EXCEEDED)
      // The wrapper is three processes: the launcher (PID 1, reaps zombies), the executable and its
      // process spawner (src/lib/process/spawner.ts).
      await waitFor(() => c.pids().length === 3, `only the wrapper to be left (pids: ${c.pids().join(' ')})`)
    })

    it('cuts off output over the max message size with RESOURCE_EXHAUSTED', async () => {
      const err = (await client(c).evaluateRaw('x', markedInput('flood')).catch((e: grpc.ServiceError) => e)) as grpc.ServiceError
      expect(err.code).to.equal(grpc.status.RESOURCE_EXHAUSTED)
    })

    it('on SIGTERM finishes the call in flight and exits 0', async () => {
      const inFlight = client(c).evaluateRaw('x', markedInput('slow'))
      await waitFor(() => c.pids().length > 3, 'the function to be running')
      c.signal('TERM')
      expect((await inFlight).resourceList.toString()).to.contain('# mode=slow')
      const {code} = await c.exited
      expect(code, c.stderr()).to.equal(0)
      expect(c.stderr()).to.match(/"msg":"draining"/)
    })
  })
})
