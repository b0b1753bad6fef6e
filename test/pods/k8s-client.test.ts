import {expect} from 'chai'
import {mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {FnrError} from '../../src/lib/errors.js'
import {SERVICE_ACCOUNT_DIR, connectKube, runnerNamespace} from '../../src/lib/k8s/client.js'
import {isRetryableApiError, kubeError} from '../../src/lib/k8s/errors.js'
import {TempDirs} from '../support/tmp.js'

const KUBECONFIG = (server: string, ns: string): string => `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: ${server}, insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: ${ns}}}]
current-context: x
`

describe('Kubernetes client construction', () => {
  const temp = new TempDirs()
  after(() => temp.cleanup())

  it('uses in-cluster config when the service account is there', async () => {
    const root = await temp.make()
    const sa = path.join(root, SERVICE_ACCOUNT_DIR)
    await mkdir(sa, {recursive: true})
    await writeFile(path.join(sa, 'token'), 'tok')
    await writeFile(path.join(sa, 'ca.crt'), '')
    await writeFile(path.join(sa, 'namespace'), 'porch-system\n')
    const saved = {host: process.env.KUBERNETES_SERVICE_HOST, port: process.env.KUBERNETES_SERVICE_PORT}
    process.env.KUBERNETES_SERVICE_HOST = '10.0.0.1'
    process.env.KUBERNETES_SERVICE_PORT = '6443'
    try {
      const clients = await connectKube({rootPrefix: root, env: {...process.env, HOME: root}})
      expect(clients.source).to.equal('in-cluster')
      expect(clients.server).to.equal('https://10.0.0.1:6443')
      expect(clients.contextNamespace).to.equal('porch-system')
      expect(runnerNamespace(clients, {}, sa)).to.equal('porch-system')
    } finally {
      for (const [k, v] of [['KUBERNETES_SERVICE_HOST', saved.host], ['KUBERNETES_SERVICE_PORT', saved.port]] as const) {
        if (v === undefined) delete process.env[k]
        else process.env[k] = v
      }
    }
  })

  it('uses $KUBECONFIG (merging the list) or --kubeconfig, and its context namespace', async () => {
    const dir = await temp.make()
    const a = path.join(dir, 'a')
    const b = path.join(dir, 'b')
    await writeFile(a, KUBECONFIG('http://127.0.0.1:1', 'team-a'))
    await writeFile(b, KUBECONFIG('http://127.0.0.1:2', 'team-b').replace(/name: (c|u|x)\b/g, 'name: $1b').replace('cluster: c,', 'cluster: cb,').replace('user: u,', 'user: ub,').replace('current-context: x', 'current-context: xb'))
    const viaEnv = await connectKube({rootPrefix: dir, env: {KUBECONFIG: `${path.join(dir, 'missing')}${path.delimiter}${a}${path.delimiter}${b}`, HOME: dir}})
    expect(viaEnv.source).to.equal('kubeconfig')
    expect(viaEnv.server).to.equal('http://127.0.0.1:1')
    expect(viaEnv.kubeConfig.getContexts().map((c) => c.name).sort()).to.deep.equal(['x', 'xb'])
    expect(runnerNamespace(viaEnv, {}, path.join(dir, 'no-sa'))).to.equal('team-a')
    expect(runnerNamespace(viaEnv, {POD_NAMESPACE: 'from-env'}, path.join(dir, 'no-sa'))).to.equal('from-env')
    const viaFlag = await connectKube({kubeconfig: b, rootPrefix: dir, env: {HOME: dir}})
    expect(viaFlag.server).to.equal('http://127.0.0.1:2')
  })

  it('with no configuration at all, fails with a Config error that says what to do (never localhost:8080)', async () => {
    const dir = await temp.make()
    const err = await connectKube({rootPrefix: dir, env: {HOME: dir}}).catch((e: unknown) => e)
    expect(err).to.be.instanceOf(FnrError)
    expect((err as FnrError).kind).to.equal('Config')
    expect((err as FnrError).message).to.match(/--kubeconfig|--disable-runtimes=pod/)
  })

  it('maps API errors to one-line FnrErrors by status', () => {
    const apiException = (code: number, body: unknown): Error & {code: number; body: unknown} =>
      Object.assign(new Error(`HTTP-Code: ${code}\nMessage: x\nBody: ${JSON.stringify(body)}\nHeaders: {"a":"b"}`), {code, body})
    const cases: Array<[number, string]> = [[401, 'Unauthenticated'], [403, 'PermissionDenied'], [404, 'NotFound'], [409, 'FailedPrecondition'], [422, 'InvalidArgument'], [429, 'Unavailable'], [503, 'Unavailable']]
    for (const [code, kind] of cases) {
      const e = kubeError(apiException(code, JSON.stringify({kind: 'Status', message: 'pods "x" is unhappy', reason: 'R'})), 'cannot create pod ns/x')
      expect(e.kind, String(code)).to.equal(kind)
      expect(e.message).to.equal(`cannot create pod ns/x: pods "x" is unhappy (HTTP ${code})`)
      expect(e.details).to.include({status: code, reason: 'R'})
    }
    const bodyless = kubeError(apiException(401, undefined), 'cannot list pods')
    expect(bodyless.message).to.equal('cannot list pods: HTTP 401')
    const network = kubeError(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), {code: 'ECONNREFUSED'}), 'cannot list pods')
    expect(network.kind).to.equal('Unavailable')
    expect(network.message).to.equal('cannot list pods: connect ECONNREFUSED 127.0.0.1:1')
    // client-node 2 (undici's fetch): "fetch failed", the socket's error as its cause, itself
    // perhaps under an AggregateError (several addresses tried); the message names the socket's.
    const socket = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6443'), {code: 'ECONNREFUSED'})
    for (const cause of [socket, new AggregateError([socket], '')]) {
      const fetchFailed = new TypeError('fetch failed', {cause})
      const e = kubeError(fetchFailed, 'cannot list pods')
      expect([e.kind, e.message]).to.deep.equal(['Unavailable', 'cannot list pods: connect ECONNREFUSED 127.0.0.1:6443'])
      expect(isRetryableApiError(fetchFailed)).to.equal(true)
    }
    // a cause without a code still says more than "fetch failed"
    expect(kubeError(new TypeError('fetch failed', {cause: new Error('bad port')}), 'cannot list pods').message).to.equal('cannot list pods: bad port')
  })
})
