/**
 * Porch itself calling fnr (docs/porch-swap.md, "porch-server itself with fnr as its runner"): porch-server v1.5.8
 * (built from the module proxy, scripts/porch-peers.mjs) as a process on loopback behind the project's control plane
 * (etcd 3.6, the aggregation layer), with Porch's CRDs and APIService as written, a git smart-HTTP server standing in
 * for Gitea, and `--function-runner` pointing at `fnr serve` (exec runtime, the catalog binaries mapped by
 * functions/catalog.yaml). Through porchctl: register a Repository, clone Porch's test blueprint `bucket/v1` (its
 * pipeline runs apply-setters v0.2.2), edit its setters (render again), propose, approve. The same scenario then runs
 * with Porch's own runner (func/server v1.5.8) in its place, and what each published to git is compared byte for byte.
 * A second package is made with `rpkg init`, given a resource and two steps, pushed, proposed and approved: set-labels
 * (exec) and set-annotations from a registry of the bed, which fnr runs in a function pod on the control plane's runc
 * node (Porch's runner, without a pod runtime here, maps that image to the same binary in its exec configuration).
 * The scenario lives in ./scenario.ts (bench/porch-server.ts times it, alternating the two runners).
 *
 * The second describe runs the same scenario against porch-server as a pod on the runc node, from Porch's own
 * Deployment, Service, APIService and RBAC (./porch-pod.ts says each change and why): kube-apiserver reaches it for
 * the APIService through the `api` Service's EndpointSlice, and it reaches fnr serve through the Service its
 * `--function-runner=function-runner:9445` names (fnr's own, from manifests/), the git server through a Service too.
 *
 * Opt-in (`npm run porch-e2e`, scripts/porch-e2e.mjs): porch-server's cold build takes most of an hour on two cores.
 */
import {expect} from 'chai'
import {loadavg} from 'node:os'

import {GIT_URL, PORCH_NS, type PorchPod} from './porch-pod.js'
import {APPLY_SETTERS, fnrCallsTo, INIT_PACKAGE, packageScenario, PACKAGE, SET_LABELS, startPorchBed, type Outcome, type PorchBed} from './scenario.js'
import type {KubeObject} from '../support/k8s/status.js'

/**
 * The process variant's outcome with fnr and its bed's function-pod image, for the pod variant to compare with when
 * both run in one process.
 */
let processOutcome: Outcome | undefined
let processPodImage: string | undefined

describe('porch-server v1.5.8 on the real control plane, with fnr serve as its function runner', function () {
  this.timeout(1_800_000)
  let bed: PorchBed | undefined
  const outcomes: Record<string, Outcome> = {}

  before(async function () {
    // fnr's pod runtime on: one step of the rpkg init package runs in a function pod on the runc node.
    bed = await startPorchBed([], {pods: true})
  })

  after(async function () {
    await bed?.stop()
  })

  it('fnr serve: registers the repository, clones bucket/v1, renders, edits and renders again, proposes and approves', async () => {
    const o = await packageScenario(bed!, 'fnr', `127.0.0.1:${bed!.fnr.port}`)
    outcomes.fnr = o
    processOutcome = o
    processPodImage = bed!.podImage
    // fnr served porch-server's calls: apply-setters, through the exec runtime.
    const calls = fnrCallsTo(bed!)
    expect(calls.length, bed!.fnr.stderr().slice(-3000)).to.be.greaterThan(0)
    for (const c of calls) expect(c).to.include({code: 0, evaluator: 'exec', image: APPLY_SETTERS})
    o.steps.push(...calls.map((c) => ({what: 'fnr: one EvaluateFunction call (apply-setters, exec)', ms: c.ms})))
    expect(o.tags).to.include(`${PACKAGE}/v1`)
    expect(o.lifecycle).to.equal('Published')
    // What porch-server keeps of the last render: kpt's result, exit code 0, no error.
    expect(o.renderStatus, 'renderStatus').to.deep.equal({result: {metadata: {}, exitCode: 0}, error: ''})
    const bucket = o.published.get(`${PACKAGE}/bucket.yaml`)?.toString()
    expect(bucket, [...o.published.keys()].join(', ')).to.contain('name: swap-proof-fnr-bucket').and.contain('storageClass: coldline').and.contain('cnrm.cloud.google.com/project-id: swap-proof')
    // The package `rpkg init` made: its pipeline's set-labels ran through fnr's exec runtime when it was pushed.
    const labelCalls = fnrCallsTo(bed!, SET_LABELS)
    expect(labelCalls.length, bed!.fnr.stderr().slice(-3000)).to.be.greaterThan(0)
    for (const c of labelCalls) expect(c).to.include({code: 0, evaluator: 'exec', image: SET_LABELS})
    expect(o.tags).to.include(`${INIT_PACKAGE}/v1`)
    expect(o.published.get(`${INIT_PACKAGE}/settings.yaml`)?.toString(), [...o.published.keys()].join(', ')).to.contain('team: swap-proof')
    expect(o.published.get(`${INIT_PACKAGE}/Kptfile`)?.toString()).to.contain('made by porchctl rpkg init').and.contain(SET_LABELS)
    // Its second step, set-annotations from the bed's registry, which fnr's exec configuration does not map: a
    // function pod on the runc node.
    const podCalls = fnrCallsTo(bed!, bed!.podImage!)
    expect(podCalls.length, bed!.fnr.stderr().slice(-3000)).to.be.greaterThan(0)
    for (const c of podCalls) expect(c).to.include({code: 0, evaluator: 'pod'})
    o.steps.push(...labelCalls.map((c) => ({what: 'fnr: one EvaluateFunction call (set-labels, exec)', ms: c.ms})), ...podCalls.map((c) => ({what: 'fnr: one EvaluateFunction call (set-annotations, function pod)', ms: c.ms})))
    expect(o.published.get(`${INIT_PACKAGE}/settings.yaml`)?.toString()).to.contain('owner: swap-proof')
  })

  it("Porch's own runner in its place: the same package, byte for byte, in git", async function () {
    expect(outcomes.fnr, 'the fnr scenario ran').to.not.equal(undefined)
    const fnrCallsBefore = fnrCallsTo(bed!).length
    const o = await packageScenario(bed!, 'porch', `127.0.0.1:${bed!.porchRunner.port}`)
    outcomes.porch = o
    // porch-server called Porch's runner this time, not fnr.
    expect(fnrCallsTo(bed!).length).to.equal(fnrCallsBefore)
    expect(o.lifecycle).to.equal('Published')
    expect(o.renderStatus).to.deep.equal(outcomes.fnr!.renderStatus)
    expect([...o.published.keys()]).to.deep.equal([...outcomes.fnr!.published.keys()])
    for (const [p, bytes] of o.published) expect(outcomes.fnr!.published.get(p)!.equals(bytes), `${p}, byte for byte:\n${outcomes.fnr!.published.get(p)}\n---\n${bytes}`).to.equal(true)
    expect(o.tags).to.deep.equal(outcomes.fnr!.tags)
    // The measurements (docs/porch-swap.md records them).
    const rows = o.steps.map((s, i) => `| ${s.what} | ${outcomes.fnr!.steps[i]?.ms ?? ''} | ${s.ms} |`)
    rows.push(...outcomes.fnr!.steps.slice(o.steps.length).map((s) => `| ${s.what} | ${s.ms} | |`))
    console.log(`\n      published: ${[...o.published].map(([p, b]) => `${p} (${b.length} bytes)`).join(', ')}; tags: ${o.tags.join(', ')}`)
    console.log(`\n      load average ${loadavg().map((l) => l.toFixed(2)).join(', ')}\n      | step | fnr (ms) | Porch's runner (ms) |\n      |---|---|---|\n${rows.map((r) => `      ${r}`).join('\n')}`)
  })
})

describe("porch-server v1.5.8 as a pod from Porch's Deployment (image laid out locally), with fnr serve as its function runner", function () {
  this.timeout(1_800_000)
  let bed: PorchBed | undefined
  let podOutcome: Outcome | undefined

  before(async function () {
    bed = await startPorchBed([], {pods: true, porchPod: true})
  })

  after(async function () {
    await bed?.stop()
  })

  it('the Deployment as Porch writes it: the APIService Available through the pod; then clone, render, edit, propose, approve with fnr', async () => {
    const o = await packageScenario(bed!, 'fnr-pod', `127.0.0.1:${bed!.fnr.port}`)
    podOutcome = o
    const server = bed!.server as PorchPod
    // porch-server ran in its pod: the image swapped, `--cache-type=db` gone, the runner address as Porch writes it.
    const container = (server.deployment.spec.template.spec.containers as KubeObject[])[0]!
    expect(container.image).to.equal(bed!.porchImage)
    expect(container.args).to.include('--function-runner=function-runner:9445').and.not.include('--cache-type=db')
    const pod = await bed!.client.get(`/api/v1/namespaces/${PORCH_NS}/pods/${server.pod}`)
    const status = (pod.status.containerStatuses as KubeObject[])[0]!
    expect(status.ready, JSON.stringify(status)).to.equal(true)
    expect(status.restartCount).to.equal(0)
    // kube-apiserver reached the pod for the APIService: through the `api` Service's EndpointSlice, the pod IP.
    const slices = (await bed!.client.get(`/apis/discovery.k8s.io/v1/namespaces/${PORCH_NS}/endpointslices`, {labelSelector: 'kubernetes.io/service-name=api'})).items as KubeObject[]
    expect(slices.flatMap((sl) => (sl.endpoints as KubeObject[]).flatMap((e) => e.addresses as string[]))).to.include(pod.status.podIP)
    const apiService = await bed!.client.get('/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.porch.kpt.dev')
    expect(apiService.spec.service).to.deep.equal({name: 'api', namespace: PORCH_NS, port: 443})
    // With the Deployment's CERT_STORAGE_DIR, porch-server registered its webhooks on the `api` Service (port 8443):
    // the Repository one (create/update, failurePolicy Fail) admitted `porchctl repo reg`, kube-apiserver calling
    // the pod through the Service's EndpointSlice.
    const webhook = await bed!.client.get('/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/repository-validating-webhook')
    expect(webhook.webhooks[0].clientConfig.service).to.include({name: 'api', namespace: PORCH_NS, port: 8443})
    expect(webhook.webhooks[0].failurePolicy).to.equal('Fail')
    // porch-server reached fnr serve through fnr's Service (connections from the pod's side), and git through its
    // Service: the git server's requests came from the pod's host address, the node's end of its veth.
    expect(server.runnerConnections()).to.be.greaterThan(0)
    expect(bed!.git.clients.get(server.hostIP) ?? 0, JSON.stringify([...bed!.git.clients])).to.be.greaterThan(0)
    expect(o.tags).to.include(`${PACKAGE}/v1`)
    expect(o.lifecycle).to.equal('Published')
    // The same assertions as the process variant's: fnr served every call, the render succeeded, what was published.
    const calls = fnrCallsTo(bed!)
    expect(calls.length, bed!.fnr.stderr().slice(-3000)).to.be.greaterThan(0)
    for (const c of calls) expect(c).to.include({code: 0, evaluator: 'exec', image: APPLY_SETTERS})
    expect(o.renderStatus, 'renderStatus').to.deep.equal({result: {metadata: {}, exitCode: 0}, error: ''})
    const bucket = o.published.get(`${PACKAGE}/bucket.yaml`)?.toString()
    expect(bucket, [...o.published.keys()].join(', ')).to.contain('name: swap-proof-fnr-bucket').and.contain('storageClass: coldline').and.contain('cnrm.cloud.google.com/project-id: swap-proof')
    const labelCalls = fnrCallsTo(bed!, SET_LABELS)
    expect(labelCalls.length).to.be.greaterThan(0)
    for (const c of labelCalls) expect(c).to.include({code: 0, evaluator: 'exec', image: SET_LABELS})
    const podCalls = fnrCallsTo(bed!, bed!.podImage!)
    expect(podCalls.length).to.be.greaterThan(0)
    for (const c of podCalls) expect(c).to.include({code: 0, evaluator: 'pod'})
    expect(o.tags).to.include(`${INIT_PACKAGE}/v1`)
    expect(o.published.get(`${INIT_PACKAGE}/settings.yaml`)?.toString(), [...o.published.keys()].join(', ')).to.contain('team: swap-proof').and.contain('owner: swap-proof')
    expect(o.published.get(`${INIT_PACKAGE}/Kptfile`)?.toString()).to.contain('made by porchctl rpkg init').and.contain(SET_LABELS)
    // The upstream the pod cloned from is the git Service's address, as a Porch user registers an in-cluster Gitea.
    expect(o.published.get(`${PACKAGE}/Kptfile`)?.toString()).to.contain(GIT_URL)
    // With the process variant in the same run: what each published, byte for byte, but for two addresses of each
    // bed: the git server's in the Kptfile's upstream and upstreamLock (where each porch-server cloned from), and
    // the registry's (a free port) in the function-pod step's image.
    if (processOutcome) {
      const processUrl = /repo: (http:\/\/127\.0\.0\.1:\d+)\//.exec(processOutcome.published.get(`${PACKAGE}/Kptfile`)!.toString())?.[1]
      expect(processUrl, 'the process variant\'s upstream URL').to.be.a('string')
      const registryOf = (image: string): string => image.slice(0, image.indexOf('/'))
      expect([...o.published.keys()]).to.deep.equal([...processOutcome.published.keys()])
      for (const [p, bytes] of o.published) {
        const expected = processOutcome.published.get(p)!.toString().replaceAll(processUrl!, GIT_URL).replaceAll(`${registryOf(processPodImage!)}/`, `${registryOf(bed!.podImage!)}/`)
        expect(bytes.toString(), `${p}, byte for byte with the process variant`).to.equal(expected)
      }
      expect(o.tags).to.deep.equal(processOutcome.tags)
    }
    for (const c of [...calls.map((x) => ['apply-setters, exec', x.ms] as const), ...labelCalls.map((x) => ['set-labels, exec', x.ms] as const), ...podCalls.map((x) => ['set-annotations, function pod', x.ms] as const)]) o.steps.push({what: `fnr: one EvaluateFunction call (${c[0]})`, ms: c[1]})
    console.log(`\n      porch-server image laid out and pushed in ${bed!.porchImageMs} ms; after the Deployment's apply (ms): ${JSON.stringify(server.stages)}`)
    console.log(`\n      compared with the process variant: ${processOutcome ? 'yes, byte for byte' : 'no (it did not run in this process)'}`)
  })

  it("Porch's own runner behind the same Service: the same package, byte for byte, in git", async function () {
    expect(podOutcome, 'the fnr scenario ran').to.not.equal(undefined)
    const fnrCallsBefore = fnrCallsTo(bed!).length
    // A new porch-server pod from the same Deployment; only the `function-runner` Service's endpoint changes.
    const o = await packageScenario(bed!, 'porch-pod', `127.0.0.1:${bed!.porchRunner.port}`)
    const server = bed!.server as PorchPod
    console.log(`\n      after the Deployment's apply (ms): ${JSON.stringify(server.stages)}`)
    expect(server.runnerConnections()).to.be.greaterThan(0)
    expect(fnrCallsTo(bed!).length).to.equal(fnrCallsBefore)
    expect(o.lifecycle).to.equal('Published')
    expect(o.renderStatus).to.deep.equal(podOutcome!.renderStatus)
    expect([...o.published.keys()]).to.deep.equal([...podOutcome!.published.keys()])
    for (const [p, bytes] of o.published) expect(podOutcome!.published.get(p)!.equals(bytes), `${p}, byte for byte:\n${podOutcome!.published.get(p)}\n---\n${bytes}`).to.equal(true)
    expect(o.tags).to.deep.equal(podOutcome!.tags)
    const rows = o.steps.map((st, i) => `| ${st.what} | ${podOutcome!.steps[i]?.ms ?? ''} | ${st.ms} |`)
    rows.push(...podOutcome!.steps.slice(o.steps.length).map((st) => `| ${st.what} | ${st.ms} | |`))
    console.log(`\n      load average ${loadavg().map((l) => l.toFixed(2)).join(', ')}\n      | step (porch-server as a pod) | fnr (ms) | Porch's runner (ms) |\n      |---|---|---|\n${rows.map((r) => `      ${r}`).join('\n')}`)
  })
})
