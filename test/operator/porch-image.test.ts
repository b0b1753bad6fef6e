/**
 * The image swap (docs/porch-swap.md): Porch's own Deployment and templates, with only the images
 * swapped for fnr's, run fnr. There is no Docker engine here, so each image's filesystem is
 * assembled from its Dockerfile's runtime stage, and Porch's exact command lines run in it:
 *
 *   - the fnr image (docker/fnr.Dockerfile): the runtime stage's COPY --from=build files, taken from
 *     the repository's build output (the build stage is test/operator/dockerfile.test.ts's), the
 *     host's /usr, /etc and /dev bound in (the base image's part), in a mount and network
 *     namespace of its own. Porch's container command from head/ and v1.5.8/
 *     porch_2-function-runner.yaml runs there as user 10001 with the container's env, and Porch's
 *     readiness probe (`/home/nonroot/grpc-health-probe -addr localhost:9445`) runs in the same
 *     namespaces as user 10001, as the kubelet would; a shipped function is evaluated over gRPC;
 *   - the wrapper-server image (docker/wrapper-server.Dockerfile): its root filesystem (static
 *     busybox, the packaged folder at /home/nonroot/wrapper-server) under runc. The init container
 *     of Porch's base PodTemplate (head/porch_22-function-templates.yaml) copies the folder into an
 *     emptyDir as the image's user; the function container made by fnr from that PodTemplate
 *     (command, args, env exactly as fnr would create the pod) runs in a busybox function image as
 *     user 10001 with its own network namespace, and the template's readiness and liveness probes
 *     (`/wrapper-server-tools/grpc-health-probe -addr localhost:9446`) pass inside it.
 *
 * What is not reproduced: the base images themselves (the host's files, Debian's tini among them, stand in
 * for node:26-bookworm-slim's; /home/nonroot/server starts node under tini as in the image).
 * The pod runtime is disabled in the fnr image run (--disable-runtimes=pod appended to Porch's
 * args): its namespace has no cluster; test/config/porch-files.test.ts runs Porch's args with the
 * pod runtime against the test bed.
 */
import {spawn, spawnSync, type ChildProcess} from 'node:child_process'
import {chmod, cp, mkdir, readFile, symlink, writeFile} from 'node:fs/promises'
import path from 'node:path'

import type {V1Container, V1Pod, V1PodTemplate} from '@kubernetes/client-node'
import {expect} from 'chai'
import {parse as parseYaml, parseAllDocuments} from 'yaml'

import {templatesFromPorchObjects} from '../../src/lib/pods/cluster/template-porch.js'
import {buildPod} from '../../src/lib/pods/model/template.js'
import {REPO_ROOT} from '../support/serve.js'
import {requireShared} from '../support/shared.js'
import {TempDirs} from '../support/tmp.js'
import {dockerfileCopies, dockerfileFinalStage} from '../support/node/fnr-image.js'
import {copyFolder, packagedFolder, PACKAGE_TIMEOUT_MS} from '../wrapper/support/package.js'
import {findRunc, findStaticBusybox, probeRunc} from '../wrapper/support/runc.js'

const PORCH = path.join(REPO_ROOT, '..', 'shared', 'compat', 'porch')
const PORCH_UID = 10001

/** Porch's function-runner container (command, env, probe) from a porch_2-function-runner.yaml. */
async function porchRunner(version: string): Promise<V1Container> {
  const docs = parseAllDocuments(await readFile(path.join(PORCH, version, 'porch_2-function-runner.yaml'), 'utf8')).map((d) => d.toJS() as {kind?: string; spec?: {template?: {spec?: {containers?: V1Container[]}}}})
  const deployment = docs.find((d) => d.kind === 'Deployment')!
  return deployment.spec!.template!.spec!.containers!.find((c) => c.name === 'function-runner')!
}

function sh(cmd: string, args: string[], options: {env?: NodeJS.ProcessEnv; timeout?: number} = {}): {code: number | null; out: string} {
  const r = spawnSync(cmd, args, {encoding: 'utf8', timeout: options.timeout ?? 60_000, env: options.env ?? process.env})
  return {code: r.status, out: `${r.stdout ?? ''}${r.stderr ?? ''}`}
}

describe("Porch's Deployment and templates with only the images swapped (assembled images)", function () {
  before(() => requireShared('compat/porch'))
  this.timeout(300_000)
  const temp = new TempDirs()
  const children: ChildProcess[] = []

  after(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL')
    await temp.cleanup()
  })

  describe('the fnr image (docker/fnr.Dockerfile)', () => {
    let root: string

    before(async () => {
      root = await temp.make('fnr-porch-image-')
      await chmod(root, 0o755) // the image's / (a temp dir is 0700)
      const stage = await dockerfileFinalStage('fnr.Dockerfile')
      for (const c of dockerfileCopies(stage)) {
        expect(c.from, `COPY ${c.sources.join(' ')}`).to.equal('build')
        for (const source of c.sources) {
          const rel = path.relative('/src', source)
          const dest = c.dest.endsWith('/') || c.sources.length > 1 ? path.join(c.dest, path.basename(source)) : c.dest
          const target = path.join(root, path.isAbsolute(dest) ? dest : path.join('/app', dest))
          await mkdir(path.dirname(target), {recursive: true})
          // node_modules is bound in below (the build stage's production install stands in as the repository's)
          if (rel === 'node_modules') await mkdir(target, {recursive: true})
          else await cp(path.join(REPO_ROOT, rel), target, {recursive: true, verbatimSymlinks: true})
        }
      }
      const link = stage.find((i) => i.op === 'RUN' && i.args.includes('ln -s'))!.args
      const [, linkTarget, linkName] = /ln -s (\S+) (\S+)/.exec(link)!
      await symlink(linkTarget!, path.join(root, linkName!))
      // the base image's part: merged-usr links, and mount points for /usr, /etc, /dev, /proc, /tmp
      for (const d of ['usr', 'etc', 'dev', 'proc', 'tmp']) await mkdir(path.join(root, d), {recursive: true})
      for (const [l, t] of [['bin', 'usr/bin'], ['lib', 'usr/lib'], ['lib64', 'usr/lib64'], ['sbin', 'usr/sbin']]) await symlink(t!, path.join(root, l!))
      await chmod(path.join(root, 'tmp'), 0o1777)
    })

    it('has the paths Porch\'s Deployment uses, runnable by any user', async () => {
      for (const p of ['/home/nonroot/server', '/home/nonroot/grpc-health-probe']) {
        const st = spawnSync('stat', ['-c', '%a', path.join(root, p)], {encoding: 'utf8'})
        expect(Number.parseInt(st.stdout.trim(), 8) & 0o005, `${p} is readable and executable by others`).to.equal(0o005)
      }
      for (const v of ['head', 'v1.5.8', 'v1.5.7']) {
        const c = await porchRunner(v)
        expect(c.command![0], v).to.equal('/home/nonroot/server')
        if (c.readinessProbe) expect(c.readinessProbe.exec!.command!.slice(0, 1), v).to.deep.equal(['/home/nonroot/grpc-health-probe'])
        for (const arg of c.command!.slice(1)) {
          const m = /^--(?:config|functions)=(.*)$/.exec(arg)
          if (m) await readFile(path.join(root, m[1]!)).catch(async () => spawnSync('test', ['-d', path.join(root, m[1]!)]).status === 0 || expect.fail(`${v}: ${arg}: missing in the image`))
        }
      }
    })

    for (const version of ['head', 'v1.5.8']) {
      it(`${version}: Porch's command, env and user start fnr; Porch's readiness probe passes; a shipped function runs`, async () => {
        const runner = await porchRunner(version)
        const env: Record<string, string> = {PATH: '/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin', HOME: '/home/nonroot', NODE_ENV: 'production'}
        for (const e of runner.env ?? []) env[e.name] = e.value ?? ''
        const uid = runner.securityContext?.runAsUser ?? PORCH_UID
        const gid = runner.securityContext?.runAsGroup ?? uid
        expect(uid).to.equal(PORCH_UID)
        // the kubelet starts the command in the image's WORKDIR
        const workdir = (await dockerfileFinalStage('fnr.Dockerfile')).filter((i) => i.op === 'WORKDIR').at(-1)!.args
        const q = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`
        const script = [
          'set -e',
          // (busybox-static's ip: iproute2 is not among the test packages)
          `${q(findStaticBusybox()!)} ip link set lo up`,
          `for d in usr etc dev; do mount --rbind /$d ${q(root)}/$d; done`,
          `mount --bind ${q(path.join(REPO_ROOT, 'node_modules'))} ${q(path.join(root, 'app/node_modules'))}`,
          `mount -t proc proc ${q(root)}/proc`,
          `exec chroot --userspec=${uid}:${gid} ${q(root)} /usr/bin/env -C ${q(workdir)} -i ${Object.entries(env).map(([k, v]) => q(`${k}=${v}`)).join(' ')} ${[...runner.command!, ...(runner.args ?? []), '--disable-runtimes=pod'].map(q).join(' ')}`,
        ].join('\n')
        // no --fork: the spawned process becomes tini, fnr's parent (sh, chroot, env, server and tini each exec the next)
        const child = spawn('unshare', ['--mount', '--net', '--propagation', 'private', 'sh', '-c', script], {stdio: ['ignore', 'pipe', 'pipe']})
        children.push(child)
        let log = ''
        child.stdout!.on('data', (d: Buffer) => (log += d.toString()))
        child.stderr!.on('data', (d: Buffer) => (log += d.toString()))
        const pid = child.pid!
        const inPod = (args: string[], user = true): {code: number | null; out: string} =>
          sh('nsenter', ['-t', String(pid), '--net', '--mount', '--root', '--wd', ...(user ? ['-S', String(uid), '-G', String(gid)] : []), ...args], {env: {PATH: env.PATH}})
        try {
          // the kubelet runs the readiness probe until it passes
          const probe = runner.readinessProbe!.exec!.command!
          const started = Date.now()
          let last = {code: null as number | null, out: ''}
          while (Date.now() - started < 120_000) {
            if (child.exitCode !== null) break
            last = inPod(probe)
            if (last.code === 0) break
            await new Promise((r) => setTimeout(r, 300))
          }
          expect(last.code, `probe ${probe.join(' ')}: ${last.out}\nfnr's log:\n${log}`).to.equal(0)
          expect(last.out).to.contain('status: SERVING')
          // it runs as Porch's user
          const status = await readFile(`/proc/${pid}/status`, 'utf8')
          expect(/^Uid:\s+(\d+)/m.exec(status)![1]).to.equal(String(uid))
          // tini (Debian's, bound in with the host's /usr as the image's own is) execs first and runs fnr as its child
          const comm = (await readFile(`/proc/${pid}/comm`, 'utf8')).trim()
          expect(comm).to.equal('tini')
          const [nodePid] = (await readFile(`/proc/${pid}/task/${pid}/children`, 'utf8')).trim().split(/\s+/)
          expect(await readFile(`/proc/${nodePid}/comm`, 'utf8')).to.match(/^node/)
          expect(/^Uid:\s+(\d+)/m.exec(await readFile(`/proc/${nodePid}/status`, 'utf8'))![1]).to.equal(String(uid))
          // a function of the image's config.yaml, called over gRPC inside the pod's network
          const config = parseYaml(await readFile(path.join(root, 'home/nonroot/config.yaml'), 'utf8')) as {functions: Array<{function: string; images: string[]}>}
          const image = config.functions.find((f) => f.function === 'set-namespace')!.images[0]!
          const call = `import {EvaluatorClient} from ${JSON.stringify(path.join(REPO_ROOT, 'dist/lib/grpc/client.js'))}
const c = new EvaluatorClient('127.0.0.1:9445')
const rl = Buffer.from('apiVersion: config.kubernetes.io/v1\\nkind: ResourceList\\nitems:\\n- apiVersion: v1\\n  kind: ConfigMap\\n  metadata:\\n    name: cfg\\nfunctionConfig:\\n  apiVersion: v1\\n  kind: ConfigMap\\n  metadata:\\n    name: fn\\n  data:\\n    namespace: swapped\\n')
const r = await c.evaluateRaw(${JSON.stringify(image)}, rl, {deadline: Date.now() + 60000})
process.stdout.write(r.resourceList.toString())
c.close()`
          const client = sh('nsenter', ['-t', String(pid), '--net', process.execPath, '--input-type=module', '-e', call])
          expect(client.code, `${client.out}\nfnr's log:\n${log}`).to.equal(0)
          expect(client.out).to.contain('namespace: swapped')
        } finally {
          child.kill('SIGTERM')
          if (child.exitCode === null) await new Promise((r) => child.once('close', r))
        }
        expect(child.exitCode, log).to.equal(0)
      })
    }
  })

  describe('the wrapper-server image (docker/wrapper-server.Dockerfile) under runc, with Porch\'s base PodTemplate', () => {
    let work: string
    let state: string
    let wrapperRoot: string
    const ids: string[] = []

    before(async function () {
      this.timeout(PACKAGE_TIMEOUT_MS)
      work = await temp.make('fnr-porch-wrapper-image-')
      state = path.join(work, 'runc-state')
      await mkdir(state)
      const reason = await probeRunc(work, state)
      if (reason) throw new Error(`runc cannot run containers here: ${reason}`)
      // The image's root filesystem as its final stage describes it.
      const stage = await dockerfileFinalStage('wrapper-server.Dockerfile')
      expect(stage.find((i) => i.op === 'USER')?.args).to.equal('65532:65532')
      wrapperRoot = path.join(work, 'wrapper-image', 'rootfs')
      await mkdir(path.join(wrapperRoot, 'bin'), {recursive: true})
      await cp(findStaticBusybox()!, path.join(wrapperRoot, 'bin', 'busybox'))
      for (const applet of ['sh', 'cp', 'ls', 'cat']) await symlink('busybox', path.join(wrapperRoot, 'bin', applet))
      await mkdir(path.join(wrapperRoot, 'home', 'nonroot', 'wrapper-server'), {recursive: true})
      copyFolder(await packagedFolder(), path.join(wrapperRoot, 'home', 'nonroot', 'wrapper-server'))
      expect(sh('chmod', ['-R', 'a+rX', path.join(wrapperRoot, 'home')]).code).to.equal(0)
      await symlink('/home/nonroot/wrapper-server', path.join(wrapperRoot, 'wrapper-server'))
    })

    after(() => {
      const runc = findRunc()
      for (const id of ids) {
        if (!runc) break
        spawnSync(runc, ['--root', state, 'kill', id, 'KILL'])
        spawnSync(runc, ['--root', state, 'delete', '--force', id])
      }
    })

    /** Writes a runc bundle: its own network namespace (runc brings lo up), read-only root, the emptyDir bound rw. */
    async function bundle(name: string, rootfs: string, processSpec: {args: string[]; env: string[]; uid: number; gid: number}, emptyDir: string): Promise<string> {
      const dir = path.join(work, name)
      await mkdir(dir, {recursive: true})
      const runc = findRunc()!
      const r = spawnSync(runc, ['spec', '--bundle', dir], {encoding: 'utf8'})
      expect(r.status, r.stderr).to.equal(0)
      const config = JSON.parse(await readFile(path.join(dir, 'config.json'), 'utf8')) as Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any
      config.process.terminal = false
      config.process.args = processSpec.args
      config.process.env = processSpec.env
      config.process.user = {uid: processSpec.uid, gid: processSpec.gid}
      config.process.cwd = '/'
      config.root = {path: rootfs, readonly: true}
      config.mounts.push({destination: '/wrapper-server-tools', type: 'bind', source: emptyDir, options: ['rbind', 'rw']})
      config.mounts.push({destination: '/tmp', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'nodev', 'mode=1777', 'size=16m']})
      await writeFile(path.join(dir, 'config.json'), JSON.stringify(config))
      return dir
    }

    it("Porch's init container copies the wrapper; fnr's pod from Porch's PodTemplate runs as user 10001 and passes Porch's probes", async () => {
      const runc = findRunc()!
      // Porch's base PodTemplate, as fnr turns it into a pod (used as written; the init image is $WRAPPER_SERVER_IMAGE)
      const docs = parseAllDocuments(await readFile(path.join(PORCH, 'head', 'porch_22-function-templates.yaml'), 'utf8')).map((d) => d.toJS() as V1PodTemplate & {kind: string})
      const podTemplate = docs.find((d) => d.kind === 'PodTemplate')!
      const templates = templatesFromPorchObjects(podTemplate, undefined, {namespace: 'porch-fn-system', inline: {wrapperServerImage: 'fnr-wrapper-server:test'}, extra: {maxRequestBodySize: 6291456}})
      const pod: V1Pod = buildPod({templates, image: 'example.com/fn/cat:v1', command: ['/bin/cat'], name: 'cat-v1-1-abcdef12', namespace: 'porch-fn-system', labels: {}, annotations: {}, maxRequestBodySize: 6291456})
      const init = pod.spec!.initContainers![0]!
      const fn = pod.spec!.containers.find((c) => c.name === 'function')!
      expect(fn.securityContext, 'used as written: no securityContext added').to.equal(undefined)
      expect(pod.spec!.securityContext, 'used as written: no securityContext added').to.equal(undefined)

      const emptyDir = path.join(work, 'empty-dir')
      await mkdir(emptyDir)
      await chmod(emptyDir, 0o777)
      // the init container: the wrapper image's command from the template, as the image's user (the template sets none)
      const initBundle = await bundle('init', wrapperRoot, {args: [...init.command!, ...(init.args ?? [])], env: ['PATH=/bin'], uid: 65532, gid: 65532}, emptyDir)
      const initId = `fnr-porch-init-${process.pid}`
      ids.push(initId)
      const copied = sh(runc, ['--root', state, 'run', '--bundle', initBundle, initId], {timeout: 120_000})
      expect(copied.code, copied.out).to.equal(0)
      spawnSync(runc, ['--root', state, 'delete', '--force', initId])
      for (const f of ['wrapper-server', 'grpc-health-probe']) expect(sh('test', ['-e', path.join(emptyDir, f)]).code, f).to.equal(0)

      // the function container in a busybox function image, as user 10001, with the pod's command, args and env
      const fnRoot = path.join(work, 'fn-image', 'rootfs')
      await mkdir(path.join(fnRoot, 'bin'), {recursive: true})
      await cp(findStaticBusybox()!, path.join(fnRoot, 'bin', 'busybox'))
      for (const applet of ['sh', 'cat']) await symlink('busybox', path.join(fnRoot, 'bin', applet))
      const env = ['PATH=/bin', ...(fn.env ?? []).map((e) => `${e.name}=${e.value ?? ''}`)]
      const fnBundle = await bundle('function', fnRoot, {args: [...fn.command!, ...(fn.args ?? [])], env, uid: PORCH_UID, gid: PORCH_UID}, emptyDir)
      const fnId = `fnr-porch-fn-${process.pid}`
      ids.push(fnId)
      const child = spawn(runc, ['--root', state, 'run', '--bundle', fnBundle, fnId], {stdio: ['ignore', 'pipe', 'pipe']})
      children.push(child)
      let log = ''
      child.stdout!.on('data', (d: Buffer) => (log += d.toString()))
      child.stderr!.on('data', (d: Buffer) => (log += d.toString()))
      try {
        for (const [kind, probe] of [['readiness', fn.readinessProbe], ['liveness', fn.livenessProbe]] as const) {
          const command = probe!.exec!.command!
          expect(command.slice(1)).to.deep.equal(['-addr', 'localhost:9446'])
          const started = Date.now()
          let last = {code: null as number | null, out: ''}
          while (Date.now() - started < 60_000 && child.exitCode === null) {
            last = sh(runc, ['--root', state, 'exec', '--user', `${PORCH_UID}:${PORCH_UID}`, fnId, ...command])
            if (last.code === 0) break
            await new Promise((r) => setTimeout(r, 300))
          }
          expect(last.code, `${kind} probe ${command.join(' ')}: ${last.out}\nwrapper log:\n${log}`).to.equal(0)
        }
        // and the wrapper answers a call in the pod's network namespace
        const statePid = JSON.parse(sh(runc, ['--root', state, 'state', fnId]).out) as {pid: number}
        const call = `import {EvaluatorClient} from ${JSON.stringify(path.join(REPO_ROOT, 'dist/lib/grpc/client.js'))}
const c = new EvaluatorClient('127.0.0.1:9446')
const r = await c.evaluateRaw('example.com/fn/cat:v1', Buffer.from('apiVersion: config.kubernetes.io/v1\\nkind: ResourceList\\nitems:\\n- apiVersion: v1\\n  kind: ConfigMap\\n  metadata:\\n    name: through-porch-template\\n'), {deadline: Date.now() + 60000})
process.stdout.write(r.resourceList.toString())
c.close()`
        const out = sh('nsenter', ['-t', String(statePid.pid), '--net', process.execPath, '--input-type=module', '-e', call])
        expect(out.code, `${out.out}\nwrapper log:\n${log}`).to.equal(0)
        expect(out.out).to.contain('name: through-porch-template')
        const status = await readFile(`/proc/${statePid.pid}/status`, 'utf8')
        expect(/^Uid:\s+(\d+)/m.exec(status)![1]).to.equal(String(PORCH_UID))
      } finally {
        spawnSync(runc, ['--root', state, 'kill', fnId, 'KILL'])
        if (child.exitCode === null && child.signalCode === null) await new Promise((r) => child.once('close', r))
        spawnSync(runc, ['--root', state, 'delete', '--force', fnId])
      }
    })
  })
})
