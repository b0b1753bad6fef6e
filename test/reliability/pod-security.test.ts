/**
 * Security defaults of function pods (docs/runtimes.md): non-root, allowPrivilegeEscalation false,
 * capabilities drop ALL, seccomp RuntimeDefault, no service account token, in the inline template
 * and in pods made from a template ConfigMap or from Porch's PodTemplate base-pod-template that
 * omits them, with --harden-pod-templates (src/lib/pods/pod-security.ts; without it a user's
 * template is used as written: test/pods/porch-templates.test.ts). Explicit weaker settings in a
 * template are kept as written and reported. A FunctionConfig's templateOverrides.securityContext is merged over the
 * hardened securityContext (it used to replace it, dropping runAsNonRoot and seccomp). The pods fnr makes are
 * checked on the real control plane (kube-apiserver stores them as fnr sent them, its defaults added).
 */
import {readFile} from 'node:fs/promises'
import path from 'node:path'

import type {V1Pod} from '@kubernetes/client-node'
import {expect} from 'chai'
import {parse} from 'yaml'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import type {ServeOptions} from '../../src/lib/serve.js'
import {memoryLogger} from '../support/memory-logger.js'
import {waitForClusterBinaries} from '../support/cluster/shared.js'
import type {KubeObject} from '../support/k8s/status.js'
import {ensureCrd, listPods, startClusterPodBed, startClusterRuntime, type ClusterPodBed} from '../support/pods/cluster-bed.js'
import {RL, WRAPPER_IMAGE, image} from '../support/pods/index.js'
import {BARE_TEMPLATE, cm, expectSecureDefaults} from '../support/reliability/pod-security.js'
import {REPO_ROOT, makeFunctionsDir, serveOptions, startInProcess} from '../support/serve.js'
import {TempDirs} from '../support/tmp.js'

describe('reliability: function pod security defaults', function () {
  this.timeout(120_000)

  describe('on the real control plane', () => {
    waitForClusterBinaries()
    let pb: ClusterPodBed
    const temp = new TempDirs()
    before(async function () {
      this.timeout(120_000)
      pb = await startClusterPodBed()
      await ensureCrd(pb, parse(await readFile(path.join(REPO_ROOT, 'manifests', 'function-config', 'crds', 'functionconfigs.yaml'), 'utf8')) as KubeObject)
    })
    after(async function () {
      this.timeout(120_000)
      await pb?.stop()
      await temp.cleanup()
    })

    it('the pod fnr serve creates from a bare PodTemplate, with a FunctionConfig overriding runAsUser, has every default', async () => {
      const ns = await pb.namespace()
      const template = (parse(BARE_TEMPLATE.replace('image: busybox', `image: ${WRAPPER_IMAGE}`)) as V1Pod).spec!
      await pb.admin.create(`/api/v1/namespaces/${ns}/podtemplates`, {apiVersion: 'v1', kind: 'PodTemplate', metadata: {name: 'base-pod-template'}, template: {spec: template}})
      await pb.admin.create(`/apis/config.porch.kpt.dev/v1alpha1/namespaces/${ns}/functionconfigs`, {
        apiVersion: 'config.porch.kpt.dev/v1alpha1',
        kind: 'FunctionConfig',
        metadata: {name: 'cat'},
        spec: {image: 'cat', prefixes: ['example.com/fn'], podExecutor: {tags: ['v1'], templateOverrides: {securityContext: {runAsUser: 1000}}}},
      })
      const base = serveOptions({...(await makeFunctionsDir(await temp.make())), disableRuntimes: ''})
      const options: ServeOptions = {
        ...base,
        functionConfig: {source: 'crd', namespace: ns},
        pod: {...base.pod, namespace: ns, wrapperServerImage: WRAPPER_IMAGE, podAddress: 'pod-ip', metadata: pb.metadata, kubeconfig: pb.kubeconfigPath, owner: 'security-test', hardenTemplates: true},
      }
      const logger = memoryLogger()
      const running = await startInProcess(options, logger)
      const client = new EvaluatorClient(`127.0.0.1:${running.port}`)
      try {
        const res = await client.evaluateRaw(image('cat'), RL, {deadline: Date.now() + 60_000})
        expect(res.resourceList.toString()).to.equal(RL.toString())
        expect(res.trailers.get('fnr-evaluator')).to.deep.equal(['pod'])
        const [pod] = await listPods(pb, ns)
        expect(pod!.metadata!.annotations!['fn.kpt.dev/template-version']).to.match(/^porch-[0-9a-f]{12}-fc[0-9a-f]{12}$/)
        expectSecureDefaults(pod!)
        expect(pod!.spec!.securityContext!.runAsUser).to.equal(1000)
        expect(logger.lines.filter((l) => l.level === 'warn' && /weaker than/.test(l.msg))).to.deep.equal([])
      } finally {
        client.close()
        await running.stop()
      }
    })

    it('the pod the runtime creates from a bare ConfigMap template has every default', async () => {
      // the sidecar's image must be one the node knows (it is reported running without a process)
      const template = BARE_TEMPLATE.replace('image: busybox', 'image: fnr.test/wrapper-server:v1')
      await pb.admin.create(`/api/v1/namespaces/${pb.runnerNs}/configmaps`, cm(template, 'bare-template', pb.runnerNs))
      const ns = await pb.namespace()
      const h = await startClusterRuntime(pb, {namespace: ns, templateConfigMap: 'bare-template', hardenTemplates: true})
      try {
        const res = await h.evaluator.evaluate({image: image('cat'), resourceList: RL, deadline: Date.now() + 60_000})
        expect(res.resourceList.toString()).to.equal(RL.toString())
        const [pod] = await listPods(pb, ns)
        expectSecureDefaults(pod!)
      } finally {
        await h.close()
      }
    })
  })
})
