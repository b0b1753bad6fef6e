/**
 * The FunctionConfig CRD on the real control plane: fnr's manifests/function-config CRDs and Porch's, their CEL
 * rule as kube-apiserver evaluates it, and `fnr serve --function-config-source=crd` reading objects and writing
 * their status through the real status subresource.
 */
import {expect} from 'chai'
import {mkdtemp, readFile, rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import path from 'node:path'

import {FUNCTION_CONFIG_GROUP, FUNCTION_CONFIG_PLURAL, parseFunctionConfig} from '../../src/lib/config/function-config-crd.js'
import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {memoryLogger} from '../support/memory-logger.js'
import {waitCrdsEstablished, type ControlPlane} from '../support/cluster/controlplane.js'
import {adminClient, namespace, sharedControlPlane, waitForClusterBinaries} from '../support/cluster/shared.js'
import type {KubeRestClient} from '../support/k8s/client.js'
import {eventually} from '../support/k8s/fixtures.js'
import {RL} from '../support/pods/index.js'
import {REPO_ROOT, makeFunctionsDir, serveOptions, startInProcess} from '../support/serve.js'
import {requireShared} from '../support/shared.js'
import {SCRIPTS, writeExecutable} from '../support/tmp.js'

const COMPONENT = path.join(REPO_ROOT, 'manifests', 'function-config')
const PORCH_CRD = path.join(REPO_ROOT, '..', 'shared', 'compat', 'porch', 'head', 'config.porch.kpt.dev_functionconfigs.yaml')
const API = `${FUNCTION_CONFIG_GROUP}/v1alpha1`

describe('FunctionConfig CRDs on the real control plane (kube-apiserver\'s schema and CEL)', function () {
  before(() => requireShared('compat/porch/head'))
  this.timeout(120_000)
  waitForClusterBinaries()
  let cp: ControlPlane
  let admin: KubeRestClient
  let ns: {name: string; remove: () => Promise<void>}
  let dir: string

  async function kubectl(args: string[], input?: string): Promise<{code: number; stdout: string; stderr: string}> {
    return cp.kubectl(args, input === undefined ? {} : {input})
  }

  before(async () => {
    cp = await sharedControlPlane()
    admin = adminClient(cp)
    ns = await namespace(cp, 'fc')
    dir = await mkdtemp(path.join(tmpdir(), 'fnr-cluster-fc-'))
  })
  after(async () => {
    await ns?.remove()
    admin?.close()
    if (dir) await rm(dir, {recursive: true, force: true})
  })

  for (const [name, files] of [
    ['fnr\'s manifests/function-config/crds', [path.join(COMPONENT, 'crds', 'functionconfigs.yaml'), path.join(COMPONENT, 'crds', 'servicetemplates.yaml')]],
    ['Porch\'s (compat/porch/head)', [PORCH_CRD]],
  ] as const) {
    it(`${name} CRD is accepted and Established; the example object is stored and parsed by fnr; no executor is refused by the CEL rule`, async () => {
      const applied = await kubectl(['apply', '--server-side', '--force-conflicts', ...files.flatMap((f) => ['-f', f])])
      expect(applied.code, applied.stderr).to.equal(0)
      const established = await waitCrdsEstablished(cp, [`${FUNCTION_CONFIG_PLURAL}.${FUNCTION_CONFIG_GROUP}`])
      expect(established.code, established.stderr).to.equal(0)
      // discovery can lag behind Established for a moment
      await eventually(async () => (await kubectl(['get', FUNCTION_CONFIG_PLURAL, '-n', ns.name])).code === 0, 20_000, 200)

      const example = (await readFile(path.join(COMPONENT, 'example.yaml'), 'utf8')).replace(/namespace: porch-fn-system/g, `namespace: ${ns.name}`)
      const r = await kubectl(['apply', '-f', '-'], example)
      expect(r.code, r.stderr).to.equal(0)
      expect(r.stdout.trim()).to.equal('functionconfig.config.porch.kpt.dev/set-namespace created')
      const stored = await admin.get(`/apis/${API}/namespaces/${ns.name}/${FUNCTION_CONFIG_PLURAL}/set-namespace`)
      const functionsDir = path.join(dir, 'functions')
      await (await import('node:fs/promises')).mkdir(functionsDir, {recursive: true})
      await writeExecutable(path.join(functionsDir, 'set-namespace'), SCRIPTS.cat)
      const entry = await parseFunctionConfig(stored, {functionsDir})
      expect(entry.binary?.tags).to.deep.equal(['v0.4.1'])
      expect(entry.pod).to.deep.include({tags: ['v0.4.2'], ttlMs: 600_000, maxParallelPods: 2, maxWaitlistLength: 4})

      const none = `apiVersion: ${API}\nkind: FunctionConfig\nmetadata: {name: empty, namespace: ${ns.name}}\nspec: {image: empty}\n`
      const refused = await kubectl(['apply', '-f', '-'], none)
      expect(refused.code).to.not.equal(0)
      // kube-apiserver v1.37 words it without the `"object": ` the in-process test server still prints
      expect(refused.stderr).to.contain('The FunctionConfig "empty" is invalid: spec: Invalid value: At least one configuration must be specified')
      expect((await admin.raw('GET', `/apis/${API}/namespaces/${ns.name}/${FUNCTION_CONFIG_PLURAL}/empty`)).code, 'the refused object is not stored').to.equal(404)
      const ok = await kubectl(['apply', '-f', '-'], none.replace('spec: {image: empty}', 'spec: {image: empty, goExecutor: {tags: [v1]}}'))
      expect(ok.code, ok.stderr).to.equal(0)
      // an update that drops the last executor is refused too (the rule runs on updates)
      for (const verb of ['replace', 'apply']) {
        const dropped = await kubectl([verb, '-f', '-'], none)
        expect(dropped.code, verb).to.not.equal(0)
        expect(dropped.stderr, verb).to.contain('At least one configuration must be specified')
      }
      await kubectl(['delete', '-n', ns.name, FUNCTION_CONFIG_PLURAL, '--all'])
    })
  }

  it('fnr serve --function-config-source=crd maps an exec function from a FunctionConfig and writes its status (real status subresource)', async () => {
    const fns = await makeFunctionsDir(dir)
    const created = await kubectl(
      ['apply', '-f', '-'],
      `apiVersion: ${API}\nkind: FunctionConfig\nmetadata: {name: cat, namespace: ${ns.name}}\nspec: {image: cat, prefixes: [example.com/fn], binaryExecutor: {tags: [v1], path: stderr}}\n`,
    )
    expect(created.code, created.stderr).to.equal(0)
    const logger = memoryLogger()
    const base = serveOptions({...fns, disableRuntimes: 'pod'})
    const running = await startInProcess({...base, functionConfig: {source: 'crd', namespace: ns.name}, pod: {...base.pod, kubeconfig: cp.kubeconfigPath}}, logger)
    const client = new EvaluatorClient(`127.0.0.1:${running.port}`)
    try {
      const r = await client.evaluateRaw('example.com/fn/cat:v1', RL, {deadline: Date.now() + 30_000})
      expect(r.log.toString()).to.equal('working on it\n')
      const status = await eventually(async () => {
        const o = await admin.get(`/apis/${API}/namespaces/${ns.name}/${FUNCTION_CONFIG_PLURAL}/cat`)
        return o.status?.functionRunnerObservedGeneration === o.metadata.generation && o.status
      }, 20_000, 100)
      expect(status.error ?? '').to.equal('')
    } finally {
      client.close()
      await running.stop()
    }
  })
})
