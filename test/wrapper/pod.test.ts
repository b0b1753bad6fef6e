/**
 * The packaged wrapper run as a function pod on the shared control plane (test/support/cluster/shared.ts):
 * its node, the LocalKubelet, runs the pod as host processes (both images are mapped), with the
 * pod shaped like Porch's inline template: an init
 * container that `cp -a`s the wrapper folder into the "emptyDir", the function container running
 * /wrapper-server-tools/wrapper-server with the runner's args, and grpc-health-probe as the
 * readiness probe. The kubelet runs processes on the host, so the paths under
 * /wrapper-server-tools are mapped to a temp dir (the emptyDir), and the executables run through
 * the folder's own interpreter.
 */
import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'
import {existsSync} from 'node:fs'
import {mkdir} from 'node:fs/promises'
import path from 'node:path'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {readFailure} from '../../src/lib/grpc/metadata.js'
import type {ControlPlane} from '../support/cluster/controlplane.js'
import {adminClient, namespace, sharedControlPlane, waitForClusterBinaries} from '../support/cluster/shared.js'
import {KubeRequestError, type KubeRestClient} from '../support/k8s/client.js'
import {eventually, isPodReady, mainContainerStatus, processAlive} from '../support/k8s/fixtures.js'
import type {KubeObject} from '../support/k8s/status.js'
import {TempDirs, writeExecutable} from '../support/tmp.js'
import {CONFIGMAP_OLD_NS, MULTI_MODE_FUNCTION, markedInput} from './support/functions.js'
import {packagedFolder, PACKAGE_TIMEOUT_MS} from './support/package.js'

const WRAPPER_IMAGE = 'example.com/fnr/wrapper-server:test'
const FUNCTION_IMAGE = 'example.com/fn/set-namespace:v1'
const POD = 'set-namespace-v1-1-abcdef12'

/** The pod fnr's (and Porch's) runner creates for an image, with the inline template. */
function functionPod(podNamespace: string, startedFile: string): KubeObject {
  const mount = [{name: 'wrapper-server-tools', mountPath: '/wrapper-server-tools'}]
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: POD,
      namespace: podNamespace,
      labels: {'fn.kpt.dev/image': POD},
      annotations: {'fn.kpt.dev/template-version': 'inline-v1', 'cluster-autoscaler.kubernetes.io/safe-to-evict': 'true'},
    },
    spec: {
      initContainers: [
        {name: 'copy-wrapper-server', image: WRAPPER_IMAGE, command: ['cp', '-a', '/home/nonroot/wrapper-server/.', '/wrapper-server-tools'], volumeMounts: mount},
      ],
      containers: [
        {
          name: 'function',
          image: FUNCTION_IMAGE,
          command: ['/wrapper-server-tools/wrapper-server'],
          args: ['--port', '9446', '--max-request-body-size', '6291456', '--', '/usr/local/bin/function'],
          readinessProbe: {exec: {command: ['/wrapper-server-tools/grpc-health-probe', '-addr', 'localhost:9446']}},
          env: [{name: 'STARTED_FILE', value: startedFile}],
          volumeMounts: mount,
        },
      ],
      volumes: [{name: 'wrapper-server-tools', emptyDir: {}}],
    },
  }
}

describe('packaged wrapper as a function pod (local kubelet)', function () {
  this.timeout(120_000)
  waitForClusterBinaries()
  const temp = new TempDirs()
  let cp: ControlPlane
  let ns: {name: string; remove: () => Promise<void>}
  let PODS: string
  let rest: KubeRestClient
  let emptyDir: string
  let client: EvaluatorClient
  let podIP: string
  let startedFile: string

  before(async function () {
    this.timeout(PACKAGE_TIMEOUT_MS)
    const built = await packagedFolder()
    const dir = await temp.make('fnr-wrapper-pod-')
    emptyDir = path.join(dir, 'wrapper-server-tools')
    await mkdir(emptyDir)
    const fn = await writeExecutable(path.join(dir, 'function'), MULTI_MODE_FUNCTION)
    startedFile = path.join(dir, 'slow-call-started')
    const ld = path.join(emptyDir, 'lib', 'ld-linux-x86-64.so.2')
    cp = await sharedControlPlane()
    ns = await namespace(cp, 'wrapper-pod')
    PODS = `/api/v1/namespaces/${ns.name}/pods`
    // Both images run as host processes; the path rewrites are the images' own (the node is shared).
    cp.kubelet!.setImage(WRAPPER_IMAGE, {
      commandMap: {
        // The init container really copies the folder, into the emptyDir stand-in.
        '/home/nonroot/wrapper-server/.': `${built}/.`,
        '/wrapper-server-tools': emptyDir,
      },
    })
    cp.kubelet!.setImage(FUNCTION_IMAGE, {
      commandMap: {
        // The launcher's #! line names /wrapper-server-tools, which exists only in a container:
        // the executable it runs, through its interpreter (test/wrapper/reaper.test.ts runs the launcher).
        '/wrapper-server-tools/wrapper-server': [ld, path.join(emptyDir, 'wrapper-server-sea')],
        '/wrapper-server-tools/grpc-health-probe': [ld, path.join(emptyDir, 'grpc-health-probe')],
        '/usr/local/bin/function': fn,
      },
    })
    rest = adminClient(cp)
  })

  after(async () => {
    client?.close()
    await ns?.remove()
    rest?.close()
    await temp.cleanup()
  })

  const find = (): Promise<KubeObject | undefined> =>
    rest.get(`${PODS}/${POD}`).catch((e: unknown) => {
      if (e instanceof KubeRequestError && e.code === 404) return undefined
      throw e
    })

  it('becomes Ready through grpc-health-probe after the init container copied the folder', async () => {
    await rest.create(PODS, functionPod(ns.name, startedFile))
    const pod = await eventually(async () => {
      const p = await find()
      return isPodReady(p) && p!
    }, 60_000, 50)
    expect(existsSync(path.join(emptyDir, 'wrapper-server'))).to.equal(true)
    expect(existsSync(path.join(emptyDir, 'grpc-health-probe'))).to.equal(true)
    expect(mainContainerStatus(pod)).to.include({name: 'function', ready: true, restartCount: 0})
    podIP = pod.status.podIP as string
    expect(podIP).to.match(/^127\./)
    expect(cp.kubelet!.logs(ns.name, POD) ?? '').to.match(/"port":9446.*"msg":"wrapper server is ready"/)
    client = new EvaluatorClient(`${podIP}:9446`)
  })

  it('answers EvaluateFunction on the pod IP, as the runner calls it', async () => {
    const res = await client.evaluateRaw(FUNCTION_IMAGE, CONFIGMAP_OLD_NS)
    expect(res.resourceList.toString()).to.equal(CONFIGMAP_OLD_NS.toString().replace('namespace: old', 'namespace: new'))
    const runs = await Promise.all(Array.from({length: 6}, (_, i) => client.evaluateRaw(FUNCTION_IMAGE, markedInput(`none-${i}`))))
    runs.forEach((r, i) => expect(r.resourceList.toString()).to.contain(`# mode=none-${i}\n`))
  })

  it('reports a failing function with its exit code and results', async () => {
    const err = (await client.evaluateRaw(FUNCTION_IMAGE, markedInput('fail')).catch((e: grpc.ServiceError) => e)) as grpc.ServiceError
    expect(err.code).to.equal(grpc.status.INTERNAL)
    expect(readFailure(err.metadata)).to.deep.include({exitCode: 3, results: [{message: 'bad replicas', severity: 'error'}]})
  })

  it('finishes the call in flight when the pod is deleted, then goes away', async () => {
    const pid = cp.kubelet!.podInfos().find((p) => p.namespace === ns.name && p.name === POD)!.pid!
    const inFlight = client.evaluateRaw(FUNCTION_IMAGE, markedInput('slow'))
    await eventually(() => existsSync(startedFile), 20_000)
    await rest.delete(`${PODS}/${POD}`)
    expect((await inFlight).resourceList.toString()).to.contain('# mode=slow')
    await eventually(async () => (await find()) === undefined, 60_000, 50)
    await eventually(() => !processAlive(pid))
  })
})
