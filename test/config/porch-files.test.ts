/**
 * Porch's own files work with fnr as they do with Porch (docs/porch-swap.md),
 * read at test time from ../shared/compat/porch (never copied into the repository):
 *
 *   - the pod-cache-config ConfigMaps of v1.5.8 (a list) and v1.5.7 (the older map `image: ttl`), quoted numbers,
 *     and Porch's tolerance: a file fnr cannot read is a warning and fnr serves (--strict-config: an error);
 *   - the runner Deployments of HEAD, v1.5.8 and v1.5.7: `fnr serve` started with exactly the container's args and
 *     env (the pod runtime against the real control plane through KUBECONFIG). Three things differ, each because
 *     of the test machine, not of fnr: --port=0 (no fixed ports in tests), --pod-address=pod-ip (the test node has
 *     no Service network) and the image's /home/nonroot, which is a temp dir holding the same layout (the image
 *     itself runs Porch's exact command in test/operator/porch-image.test.ts);
 *   - the 19 FunctionConfigs of HEAD with Porch's CRDs, its base PodTemplate and ServiceTemplate: none is rejected,
 *     binaryExecutor and goExecutor ids resolve to the catalog binaries (stand-ins here), podExecutor settings apply
 *     to the pods fnr makes from Porch's PodTemplate, used as its author wrote it;
 *   - a pod the API server would reject (a request above its limit) is refused before it is created.
 */
import {spawn} from 'node:child_process'
import {once} from 'node:events'
import {mkdir} from 'node:fs/promises'
import path from 'node:path'

import * as grpc from '@grpc/grpc-js'
import type {V1Container, V1Pod} from '@kubernetes/client-node'
import {expect} from 'chai'

import {type FunctionConfigObject} from '../../src/lib/config/function-config-crd.js'
import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {StaticMetadataSource} from '../../src/lib/pods/cluster/image-metadata.js'
import type {ServeOptions} from '../../src/lib/serve.js'
import {checkHealth, healthClient} from '../support/health.js'
import {waitForClusterBinaries} from '../support/cluster/shared.js'
import type {KubeObject} from '../support/k8s/status.js'
import {ensureCrd, listPods, startClusterPodBed, wrapped, type ClusterPodBed} from '../support/pods/cluster-bed.js'
import {RL, WRAPPER_IMAGE, until} from '../support/pods/index.js'
import {BIN_RUN, makeFunctionsDir, serveOptions, startInProcess} from '../support/serve.js'
import {SCRIPTS, writeExecutable} from '../support/tmp.js'
import {memoryLogger} from '../support/memory-logger.js'
import {CATALOG, headFunctionConfigs, porchDocs, porchFilesSuite} from '../support/porch-files.js'

/** The pod bed with Porch's CRDs (core/v1 PodTemplates are kube-apiserver's own). */
async function startPorchBed(): Promise<ClusterPodBed> {
  const pb = await startClusterPodBed()
  for (const file of ['config.porch.kpt.dev_functionconfigs.yaml', 'config.porch.kpt.dev_servicetemplates.yaml']) await ensureCrd(pb, (await porchDocs(`head/${file}`))[0]!)
  return pb
}

/** Creates Porch's object (a PodTemplate, ServiceTemplate or FunctionConfig) in `ns` through the admin client. */
async function createPorchObject(pb: ClusterPodBed, ns: string, object: KubeObject): Promise<void> {
  const plural = ({PodTemplate: 'podtemplates', ServiceTemplate: 'servicetemplates', FunctionConfig: 'functionconfigs'} as Record<string, string>)[object.kind as string]
  if (!plural) throw new Error(`no collection for kind ${object.kind}`)
  const apiVersion = object.apiVersion as string
  await pb.admin.create(`${apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`}/namespaces/${ns}/${plural}`, {...object, metadata: {...object.metadata, namespace: ns}})
}

async function porchRunner(version: string): Promise<V1Container> {
  const deployment = (await porchDocs(`${version}/porch_2-function-runner.yaml`)).find((d) => d.kind === 'Deployment')!
  return (deployment.spec.template.spec.containers as V1Container[]).find((c) => c.name === 'function-runner')!
}

interface Proc {
  port: number
  log(): string
  stop(): Promise<number | null>
  exited: Promise<number | null>
}

/** `node bin/run.js serve ARGS` with exactly `env` (plus PATH); resolves once it is ready, or with its exit. */
async function serveProcess(args: string[], env: Record<string, string>): Promise<Proc | {exitCode: number | null; log: string}> {
  const child = spawn(process.execPath, [BIN_RUN, 'serve', ...args], {env: {PATH: process.env.PATH ?? '/usr/bin:/bin', FNR_BIND_ADDRESS: '127.0.0.1', ...env}, stdio: ['ignore', 'pipe', 'pipe']})
  let log = ''
  child.stdout!.on('data', (d: Buffer) => (log += d.toString()))
  child.stderr!.on('data', (d: Buffer) => (log += d.toString()))
  const exited = once(child, 'exit').then(([code]) => code as number | null)
  const ready = await new Promise<number | undefined>((resolve) => {
    const timer = setTimeout(() => resolve(undefined), 60_000)
    const check = (): void => {
      const m = /"msg":"fnr serve is ready"[^\n]*"port":(\d+)|"port":(\d+)[^\n]*"msg":"fnr serve is ready"/.exec(log)
      if (m) {
        clearTimeout(timer)
        resolve(Number(m[1] ?? m[2]))
      }
    }
    child.stderr!.on('data', check)
    void exited.then(() => {
      clearTimeout(timer)
      resolve(undefined)
    })
  })
  if (ready === undefined) {
    if (child.exitCode === null) child.kill('SIGKILL')
    return {exitCode: await exited, log}
  }
  return {
    port: ready,
    log: () => log,
    exited,
    stop: async () => {
      if (child.exitCode === null) child.kill('SIGTERM')
      return exited
    },
  }
}

describe("Porch's files with fnr (../shared/compat/porch)", function () {
  this.timeout(180_000)
  const temp = porchFilesSuite()

  describe('the runner Deployments (HEAD, v1.5.8, v1.5.7): their args and env start fnr serve', () => {
    waitForClusterBinaries()
    let pb: ClusterPodBed

    before(async () => {
      // Porch's own CRDs
      pb = await startPorchBed()
    })
    after(async () => {
      await pb?.stop()
    })

    /** The container's args (after /home/nonroot/server) and env, with the test machine's three differences. */
    async function porchArgs(version: string, ns: string, home: string): Promise<{args: string[]; env: Record<string, string>}> {
      const runner = await porchRunner(version)
      expect(runner.command![0]).to.equal('/home/nonroot/server')
      const args = [...runner.command!.slice(1), ...(runner.args ?? [])].map((a) => a.replaceAll('/home/nonroot/', `${home}/`).replace(/^--pod-namespace=.*$/, `--pod-namespace=${ns}`))
      const env: Record<string, string> = {KUBECONFIG: pb.kubeconfigPath, HOME: home}
      for (const e of runner.env ?? []) env[e.name] = e.value ?? ''
      // The test node knows this wrapper-server image; Porch's names Docker Hub's.
      expect(env.WRAPPER_SERVER_IMAGE).to.match(/^docker\.io\/nephio\/porch-wrapper-server:/)
      env.WRAPPER_SERVER_IMAGE = WRAPPER_IMAGE
      return {args: [...args, '--port=0', '--pod-address=pod-ip'], env}
    }

    for (const version of ['head', 'v1.5.8', 'v1.5.7']) {
      it(`${version}: starts, reports SERVING, serves an exec function and leaves no pod it was not asked for`, async () => {
        const ns = await pb.namespace()
        const home = await temp.make(`fnr-porch-home-${version}-`)
        await makeFunctionsDir(home)
        if (version === 'head') {
          // Porch's base templates, as HEAD deploys them, in the pod namespace
          for (const d of await porchDocs('head/porch_22-function-templates.yaml')) await createPorchObject(pb, ns, d)
          // HEAD maps exec functions with FunctionConfigs (no config.yaml); one mapping to a local script
          await createPorchObject(pb, ns, {apiVersion: 'config.porch.kpt.dev/v1alpha1', kind: 'FunctionConfig', metadata: {name: 'cat', namespace: ns}, spec: {image: 'cat', prefixes: ['example.com'], binaryExecutor: {tags: ['v1'], path: 'cat'}}})
        }
        const {args, env} = await porchArgs(version, ns, home)
        const proc = await serveProcess(args, env)
        if (!('port' in proc)) expect.fail(`fnr serve exited (${proc.exitCode}) with Porch's ${version} args ${JSON.stringify(args)}:\n${proc.log}`)
        const client = new EvaluatorClient(`127.0.0.1:${proc.port}`)
        const health = healthClient(`127.0.0.1:${proc.port}`)
        try {
          await until(async () => (await checkHealth(health)) === 'SERVING', 'SERVING')
          const res = await client.evaluateRaw('example.com/cat:v1', RL, {deadline: Date.now() + 60_000})
          expect(res.resourceList.toString()).to.equal(RL.toString())
          expect(res.trailers.get('fnr-evaluator')).to.deep.equal(['exec'])
          expect(proc.log()).to.match(/"msg":"pod runtime ready"/)
          if (version === 'head') {
            expect(proc.log()).to.match(/"msg":"--function-config-source=auto: crd"/)
            // Porch's PodTemplate is used as written; its weak settings are said, once
            expect(proc.log()).to.match(/"msg":"the function pod template is weaker than fnr's security defaults; using it as written/)
          } else {
            // v1.5.x mount the pod-cache-config at /pod-cache-config; not mounted here: the defaults, said so
            expect(proc.log()).to.match(/"msg":"no pod cache config; using the flag defaults for every image"/)
          }
          expect(await listPods(pb, ns)).to.deep.equal([])
        } finally {
          client.close()
          health.close()
          expect(await proc.stop(), proc.log()).to.equal(0)
        }
      })
    }

    it('v1.5.8: a pod-cache-config fnr cannot read is a warning and fnr serves (as Porch); --strict-config makes it an error', async () => {
      const ns = await pb.namespace()
      const home = await temp.make('fnr-porch-home-strict-')
      await makeFunctionsDir(home)
      const unreadable = path.join(home, 'pod-cache-config')
      await mkdir(path.join(unreadable, 'pod-cache-config.yaml'), {recursive: true}) // a directory, not a file
      const {args, env} = await porchArgs('v1.5.8', ns, home)
      const withFile = [...args, `--pod-cache-config=${path.join(unreadable, 'pod-cache-config.yaml')}`]
      const proc = await serveProcess(withFile, env)
      if (!('port' in proc)) expect.fail(`fnr serve exited (${proc.exitCode}):\n${proc.log}`)
      try {
        expect(proc.log()).to.match(/"level":"warn".*pod cache config .*pod-cache-config\.yaml \(--pod-cache-config\) cannot be read: it is a directory \(EISDIR\); serving with the flag defaults/)
        const client = new EvaluatorClient(`127.0.0.1:${proc.port}`)
        const res = await client.evaluateRaw('example.com/cat:v1', RL, {deadline: Date.now() + 60_000})
        client.close()
        expect(res.resourceList.toString()).to.equal(RL.toString())
      } finally {
        expect(await proc.stop()).to.equal(0)
      }
      const strict = await serveProcess([...withFile, '--strict-config'], env)
      expect('port' in strict, 'must not start').to.equal(false)
      const failed = strict as {exitCode: number | null; log: string}
      expect(failed.exitCode).to.equal(3)
      expect(failed.log).to.match(/fnr: pod cache config .* cannot be read: it is a directory \(EISDIR\)/)
    })
  })

  describe("HEAD's 19 FunctionConfigs, CRDs and base templates", () => {
    let functionsDir: string
    let objects: FunctionConfigObject[]
    before(async () => {
      ;({objects, functionsDir} = await headFunctionConfigs(temp))
    })

    describe('on the real control plane, with Porch\'s CRDs and base templates', () => {
      waitForClusterBinaries()
      let pb: ClusterPodBed
      before(async () => {
        pb = await startPorchBed()
      })
      after(async () => {
        await pb?.stop()
      })

      it('serves the exec mappings, runs a podExecutor function in a pod made from Porch\'s PodTemplate as written, with its TTL', async () => {
        const ns = await pb.namespace()
        for (const d of await porchDocs('head/porch_22-function-templates.yaml')) await createPorchObject(pb, ns, d)
        for (const o of objects) await createPorchObject(pb, ns, o as KubeObject)
        // create-setters:v0.1.0 has only a podExecutor: it runs in a pod (a cat script on the test node)
        const podImage = `${CATALOG}/create-setters:v0.1.0`
        const script = await writeExecutable(path.join(pb.dir, 'functions', 'porch-create-setters'), SCRIPTS.cat)
        pb.kubelet.setImage(podImage, wrapped({'/usr/local/bin/function': script}))
        const metadata = new StaticMetadataSource((img) => (img === podImage ? ['/usr/local/bin/function'] : undefined))
        const fns = await makeFunctionsDir(await temp.make())
        const base = serveOptions({...fns, functionsDir, disableRuntimes: ''})
        const options: ServeOptions = {
          ...base,
          functionConfig: {source: 'crd', namespace: ns},
          // warm-up off: it would start 19 pods on this shared machine (the warm-up list is checked above)
          pod: {...base.pod, namespace: ns, wrapperServerImage: WRAPPER_IMAGE, podAddress: 'pod-ip', metadata, kubeconfig: pb.kubeconfigPath, owner: 'porch-files', warmUp: false, ttlMs: 60_000},
        }
        const logger = memoryLogger()
        const running = await startInProcess(options, logger)
        const client = new EvaluatorClient(`127.0.0.1:${running.port}`)
        try {
          await until(() => logger.lines.filter((l) => l.msg === 'FunctionConfig applied').length === 19, '19 FunctionConfigs applied')
          for (const [image, binary] of [[`${CATALOG}/set-namespace:v0.4.2`, 'set-namespace'], [`${CATALOG}/set-namespace:v0.4.5`, 'set-namespace'], [`${CATALOG}/apply-replacements:v0.1.5`, 'apply-replacements'], ['starlark:v0.5.2', 'starlark']]) {
            const res = await client.evaluateRaw(image!, RL, {deadline: Date.now() + 60_000})
            expect(res.trailers.get('fnr-evaluator'), image).to.deep.equal(['exec'])
            expect(res.log.toString(), image).to.equal(`${binary}\n`)
          }
          const res = await client.evaluateRaw(podImage, RL, {deadline: Date.now() + 60_000})
          expect(res.resourceList.toString()).to.equal(RL.toString())
          expect(res.trailers.get('fnr-evaluator')).to.deep.equal(['pod'])
          const [pod] = (await listPods(pb, ns)) as V1Pod[]
          const fn = pod!.spec!.containers.find((c) => c.name === 'function')!
          // Porch's PodTemplate as written: its probes, env and pull policy; no securityContext added
          expect(fn.livenessProbe?.exec?.command).to.deep.equal(['/wrapper-server-tools/grpc-health-probe', '-addr', 'localhost:9446'])
          expect(fn.env).to.deep.include({name: 'OTEL_METRICS_EXPORTER', value: 'prometheus'})
          expect(fn.securityContext).to.equal(undefined)
          expect(pod!.spec!.securityContext ?? {}).to.deep.equal({}) // (an API server defaults it to {})
          expect(pod!.spec!.initContainers![0]!.image).to.equal(WRAPPER_IMAGE)
          expect(pod!.metadata!.annotations!['cluster-autoscaler.kubernetes.io/safe-to-evict']).to.equal('true')
          // podExecutor.timeToLive 30m, over --pod-ttl (1m here)
          expect(pod!.metadata!.annotations!['fnr.dev/ttl-seconds']).to.equal('1800')
        } finally {
          client.close()
          await running.stop()
        }
      })

      it('a FunctionConfig asking for a request above its limit is refused before any pod is created (the API server would reject the pod)', async () => {
        const ns = await pb.namespace()
        const podImage = `${CATALOG}/gatekeeper:v0.2.1`
        await createPorchObject(pb, ns, {
          apiVersion: 'config.porch.kpt.dev/v1alpha1',
          kind: 'FunctionConfig',
          metadata: {name: 'gatekeeper', namespace: ns},
          // requests alone are fine; the template's limit makes it one the API server rejects
          spec: {image: 'gatekeeper', prefixes: [CATALOG], podExecutor: {tags: ['v0.2.1'], templateOverrides: {container: {resources: {requests: {memory: '2Gi'}}}}}},
        })
        await createPorchObject(pb, ns, {
          apiVersion: 'v1',
          kind: 'PodTemplate',
          metadata: {name: 'base-pod-template', namespace: ns},
          template: {spec: {containers: [{name: 'function', image: 'x', command: ['/wrapper-server-tools/wrapper-server'], resources: {limits: {memory: '1Gi'}}}]}},
        })
        const metadata = new StaticMetadataSource((img) => (img === podImage ? ['/usr/local/bin/function'] : undefined))
        const fns = await makeFunctionsDir(await temp.make())
        const base = serveOptions({...fns, disableRuntimes: ''})
        const running = await startInProcess({
          ...base,
          functionConfig: {source: 'crd', namespace: ns},
          pod: {...base.pod, namespace: ns, wrapperServerImage: WRAPPER_IMAGE, podAddress: 'pod-ip', metadata, kubeconfig: pb.kubeconfigPath, owner: 'porch-files-limits', warmUp: false},
        })
        const client = new EvaluatorClient(`127.0.0.1:${running.port}`)
        try {
          const err = (await client.evaluateRaw(podImage, RL, {deadline: Date.now() + 30_000}).then(() => undefined, (e: grpc.ServiceError) => e))!
          expect(err, 'must fail').to.not.equal(undefined)
          expect(err.code).to.equal(grpc.status.FAILED_PRECONDITION)
          expect(err.details).to.match(/the API server would reject its resources: spec\.containers\[0\] \(function\)\.resources\.requests\.memory: "2Gi" is more than the limit "1Gi"/)
          expect(await listPods(pb, ns)).to.deep.equal([])
        } finally {
          client.close()
          await running.stop()
        }
      })
    })
  })
})
