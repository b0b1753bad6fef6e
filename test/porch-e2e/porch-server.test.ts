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
 * Opt-in (`npm run porch-e2e`, scripts/porch-e2e.mjs): porch-server's cold build takes most of an hour on two cores.
 */
import {expect} from 'chai'
import {loadavg} from 'node:os'

import {APPLY_SETTERS, fnrCallsTo, INIT_PACKAGE, packageScenario, PACKAGE, SET_LABELS, startPorchBed, type Outcome, type PorchBed} from './scenario.js'

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
