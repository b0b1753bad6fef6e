// Function pods on a busy node. fnr's health probe is a Node program, and under load an exec probe can miss
// Kubernetes' default 1 s timeout while the wrapper serves: the liveness probe then restarts a serving wrapper.
// - podReadiness: a container the node stopped and restarted is waited for, not reported as a crash; a container
//   that crashed, or keeps being stopped, still fails fast.
// - buildPod: the function container's grpc-health-probe exec probes get a timeout when the template sets none
//   (Porch's PodTemplate sets none).
import {readFile} from 'node:fs/promises'
import path from 'node:path'

import type {V1ContainerStatus, V1Pod} from '@kubernetes/client-node'
import {expect} from 'chai'
import {parseAllDocuments} from 'yaml'

import {NODE_RESTARTS_WAITED, podReadiness} from '../../src/lib/pods/cluster/manager.js'
import {buildPod, HEALTH_PROBE_TIMEOUT_SECONDS, templateVersion, type Templates} from '../../src/lib/pods/model/template.js'
import {requireShared} from '../support/shared.js'

const LIVENESS = 'Container function failed liveness probe, will be restarted'

function pod(status: Partial<V1ContainerStatus>, ready = false): V1Pod {
  return {
    metadata: {name: 'p'},
    status: {
      phase: 'Running',
      podIP: '10.0.0.2',
      conditions: [{type: 'Ready', status: ready ? 'True' : 'False'}],
      containerStatuses: [{name: 'function', image: 'img', imageID: '', ready, restartCount: 0, ...status}],
    },
  }
}

describe('podReadiness: restarts by the node are not crashes', () => {
  it('a ready pod whose container the node restarted once (clean exit on SIGTERM) stays ready', () => {
    const r = podReadiness(pod({restartCount: 1, state: {running: {}}, lastState: {terminated: {exitCode: 0, reason: 'Completed', message: LIVENESS}}}, true), 'img')
    expect(r).to.deep.equal({state: 'ready', ip: '10.0.0.2', detail: 'ready'})
  })

  it('a container killed by SIGTERM or SIGKILL (143, 137) and waiting for its restart is pending, and says so', () => {
    for (const exitCode of [137, 143]) {
      const r = podReadiness(pod({restartCount: 1, state: {waiting: {reason: 'CrashLoopBackOff', message: 'back-off 10s'}}, lastState: {terminated: {exitCode, reason: 'Error'}}}), 'img')
      expect(r.state, String(exitCode)).to.equal('pending')
      expect(r.detail).to.contain(`restarted by the node 1× (last exit: exit code ${exitCode} (Error))`)
    }
  })

  it('a container the node stopped and that is running again, whatever its restart count, is waited for until ready', () => {
    const r = podReadiness(pod({restartCount: 7, state: {running: {}}, lastState: {terminated: {exitCode: 143}}}), 'img')
    expect(r.state).to.equal('pending')
    expect(r.detail).to.contain('running, not ready yet').and.contain('restarted by the node 7×')
  })

  it(`at ${NODE_RESTARTS_WAITED} restarts and not running, a container the node keeps stopping fails, with the containerExited mark`, () => {
    const r = podReadiness(pod({restartCount: NODE_RESTARTS_WAITED, state: {waiting: {reason: 'CrashLoopBackOff'}}, lastState: {terminated: {exitCode: 0, reason: 'Completed', message: LIVENESS}}}), 'img')
    expect(r.state).to.equal('failed')
    if (r.state !== 'failed') return
    expect(r.error.kind).to.equal('FailedPrecondition')
    expect(r.error.message).to.contain(`keeps being stopped by the node (${NODE_RESTARTS_WAITED} restarts; a failing liveness probe?)`).and.contain(LIVENESS)
    expect(r.error.details.containerExited).to.equal(true)
  })

  it('a crash (any other exit code) fails at once, restarted or not', () => {
    const first = podReadiness(pod({restartCount: 1, state: {waiting: {reason: 'CrashLoopBackOff'}}, lastState: {terminated: {exitCode: 3, reason: 'Error'}}}), 'img')
    expect(first.state === 'failed' && first.error.message).to.contain('is crash-looping (1 restarts), last exit: exit code 3 (Error)')
    const now = podReadiness(pod({state: {terminated: {exitCode: 1}}}), 'img')
    expect(now.state === 'failed' && now.error.message).to.contain('terminated: exit code 1')
    // A ready pod whose wrapper crashed once is evicted by the pod watch, as before.
    const crashedReady = podReadiness(pod({restartCount: 1, state: {running: {}}, lastState: {terminated: {exitCode: 2}}}, true), 'img')
    expect(crashedReady.state).to.equal('failed')
  })

  it('an OOM kill is a failure, even with the exit code of SIGKILL', () => {
    const r = podReadiness(pod({restartCount: 1, state: {running: {}}, lastState: {terminated: {exitCode: 137, reason: 'OOMKilled'}}}, true), 'img')
    expect(r.state === 'failed' && r.error.message).to.contain('exit code 137 (OOMKilled)')
  })

  it('init containers keep their rule: a non-zero exit fails, a clean one does not', () => {
    const base = pod({state: {waiting: {reason: 'PodInitializing'}}})
    base.status!.initContainerStatuses = [{name: 'copy-wrapper-server', image: 'w', imageID: '', ready: false, restartCount: 0, state: {terminated: {exitCode: 0}}}]
    expect(podReadiness(base, 'img').state).to.equal('pending')
    base.status!.initContainerStatuses[0]!.state = {terminated: {exitCode: 143}}
    expect(podReadiness(base, 'img').state).to.equal('failed')
  })
})

describe('buildPod: room for the health probe on a busy node', () => {
  const build = (templates: Templates): V1Pod => buildPod({templates, image: 'example.com/fn/cat:v1', command: ['/usr/local/bin/function'], name: 'cat-v1-1-abcdef12', namespace: 'porch-fn-system', labels: {}, annotations: {}, maxRequestBodySize: 6291456})
  const templatesOf = (pod: V1Pod): Templates => ({pod, service: {}, origin: 'test', version: templateVersion('cm', pod, {})})

  it(`Porch's PodTemplate (no timeoutSeconds): its grpc-health-probe probes get ${HEALTH_PROBE_TIMEOUT_SECONDS} s, the rest as written`, async () => {
    const head = requireShared('compat/porch/head')
    const doc = parseAllDocuments(await readFile(path.join(head, 'porch_22-function-templates.yaml'), 'utf8'))[0]!.toJS() as {template: V1Pod}
    const written = structuredClone(doc.template.spec!.containers[0]!)
    const fn = build(templatesOf(doc.template)).spec!.containers[0]!
    for (const kind of ['readinessProbe', 'livenessProbe'] as const) {
      expect(written[kind]!.timeoutSeconds, kind).to.equal(undefined)
      expect(fn[kind], kind).to.deep.equal({...written[kind], timeoutSeconds: HEALTH_PROBE_TIMEOUT_SECONDS})
    }
    // The template itself is not changed (its version, and the next pod, come from it as written).
    expect(doc.template.spec!.containers[0]!.livenessProbe!.timeoutSeconds).to.equal(undefined)
  })

  it('a timeout over 1 s the template sets is kept; other exec probes and other kinds of probe are left alone', () => {
    const pod: V1Pod = {spec: {containers: [{
      name: 'function',
      image: 'x',
      command: ['/wrapper-server-tools/wrapper-server'],
      readinessProbe: {exec: {command: ['/wrapper-server-tools/grpc-health-probe', '-addr', 'localhost:9446']}, timeoutSeconds: 2},
      livenessProbe: {exec: {command: ['/bin/true']}},
      startupProbe: {grpc: {port: 9446}},
    }]}}
    const fn = build(templatesOf(pod)).spec!.containers[0]!
    expect(fn.readinessProbe!.timeoutSeconds).to.equal(2)
    // 1 is the default the API server writes into a PodTemplate object that set none: treated as none.
    pod.spec!.containers[0]!.readinessProbe!.timeoutSeconds = 1
    expect(build(templatesOf(pod)).spec!.containers[0]!.readinessProbe!.timeoutSeconds).to.equal(HEALTH_PROBE_TIMEOUT_SECONDS)
    expect(fn.livenessProbe).to.deep.equal({exec: {command: ['/bin/true']}})
    expect(fn.startupProbe).to.deep.equal({grpc: {port: 9446}})
  })
})
