import http from 'node:http'
import type {AddressInfo} from 'node:net'

import type {CoreV1Api, V1Secret} from '@kubernetes/client-node'
import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import {DockerConfig} from '../../src/lib/registry/auth.js'
import {
  DOCKER_CONFIG_JSON_KEY,
  DOCKER_CONFIG_JSON_TYPE,
  attachPullSecret,
  buildPullSecret,
  ensurePullSecret,
  secretHasCredentialsFor,
  type SecretsApi,
} from '../../src/lib/registry/pull-secret.js'

const b64 = (s: string): string => Buffer.from(s).toString('base64')
const CONFIG_JSON = `{"auths": {"127.0.0.1:5000": {"auth": "${b64('u:p')}"}, "https://index.docker.io/v1/": {"auth": "${b64('hub:pw')}"}}}\n`

describe('registry/pull-secret: building and deciding', () => {
  it('builds a kubernetes.io/dockerconfigjson Secret holding the exact bytes', () => {
    const secret = buildPullSecret('auth-secret', 'porch-fn-system', CONFIG_JSON)
    expect(secret.apiVersion).to.equal('v1')
    expect(secret.kind).to.equal('Secret')
    expect(secret.type).to.equal(DOCKER_CONFIG_JSON_TYPE)
    expect(secret.metadata).to.include({name: 'auth-secret', namespace: 'porch-fn-system'})
    expect(Object.keys(secret.data!)).to.deep.equal([DOCKER_CONFIG_JSON_KEY])
    expect(Buffer.from(secret.data![DOCKER_CONFIG_JSON_KEY]!, 'base64').toString('utf8')).to.equal(CONFIG_JSON)
  })

  it('refuses a docker config that is not valid JSON (Config)', () => {
    expect(() => buildPullSecret('s', 'ns', '{oops')).to.throw(FnrError, /not valid JSON/)
  })

  it('attaches the secret only to images whose registry it has credentials for', () => {
    const config = DockerConfig.parse(CONFIG_JSON)
    expect(secretHasCredentialsFor(config, '127.0.0.1:5000/fn/x:v1')).to.equal(true)
    expect(secretHasCredentialsFor(config, '127.0.0.1:5001/fn/x:v1')).to.equal(false)
    expect(secretHasCredentialsFor(config, 'alpine')).to.equal(true) // Docker Hub via https://index.docker.io/v1/
    expect(secretHasCredentialsFor(config, 'ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.2.2')).to.equal(false)

    const spec: {imagePullSecrets?: Array<{name?: string}>} = {}
    expect(attachPullSecret(spec, 'auth-secret', config, '127.0.0.1:5000/fn/x:v1')).to.equal(true)
    expect(attachPullSecret(spec, 'auth-secret', config, '127.0.0.1:5000/fn/x:v1')).to.equal(false)
    expect(spec.imagePullSecrets).to.deep.equal([{name: 'auth-secret'}])
    const other: {imagePullSecrets?: Array<{name?: string}>} = {imagePullSecrets: [{name: 'mine'}]}
    expect(attachPullSecret(other, 'auth-secret', config, 'ghcr.io/x/y:v1')).to.equal(false)
    expect(attachPullSecret(other, 'auth-secret', config, 'docker.io/library/alpine')).to.equal(true)
    expect(other.imagePullSecrets).to.deep.equal([{name: 'mine'}, {name: 'auth-secret'}])
  })
})

/** An in-memory SecretsApi with client-node's error shape (ApiException: code, body string). */
class FakeSecrets {
  readonly store = new Map<string, V1Secret>()
  readonly calls: string[] = []
  rv = 1
  /** Errors to throw from the next call of a method. */
  readonly failures: Partial<Record<'read' | 'create' | 'replace', Array<{code: number; message: string; before?: () => void}>>> = {}

  private fail(method: 'read' | 'create' | 'replace'): void {
    const f = this.failures[method]?.shift()
    if (f === undefined) return
    f.before?.()
    throw Object.assign(new Error(`HTTP-Code: ${f.code}`), {code: f.code, body: JSON.stringify({kind: 'Status', message: f.message, code: f.code})})
  }

  api(): SecretsApi {
    const api = {
      readNamespacedSecret: async ({name, namespace}: {name: string; namespace: string}) => {
        this.calls.push(`read ${namespace}/${name}`)
        this.fail('read')
        const s = this.store.get(`${namespace}/${name}`)
        if (s === undefined) throw Object.assign(new Error('HTTP-Code: 404'), {code: 404, body: JSON.stringify({message: `secrets "${name}" not found`})})
        return structuredClone(s)
      },
      createNamespacedSecret: async ({namespace, body}: {namespace: string; body: V1Secret}) => {
        this.calls.push(`create ${namespace}/${body.metadata!.name}`)
        this.fail('create')
        const key = `${namespace}/${body.metadata!.name}`
        if (this.store.has(key)) throw Object.assign(new Error('HTTP-Code: 409'), {code: 409, body: '{"message":"already exists"}'})
        const stored = {...structuredClone(body), metadata: {...body.metadata, resourceVersion: String(this.rv++)}}
        this.store.set(key, stored)
        return stored
      },
      replaceNamespacedSecret: async ({name, namespace, body}: {name: string; namespace: string; body: V1Secret}) => {
        this.calls.push(`replace ${namespace}/${name}`)
        this.fail('replace')
        const key = `${namespace}/${name}`
        const current = this.store.get(key)
        if (current?.metadata?.resourceVersion !== body.metadata?.resourceVersion) {
          throw Object.assign(new Error('HTTP-Code: 409'), {code: 409, body: '{"message":"the object has been modified"}'})
        }
        const stored = {...structuredClone(body), metadata: {...body.metadata, resourceVersion: String(this.rv++)}}
        this.store.set(key, stored)
        return stored
      },
    }
    return api as unknown as SecretsApi
  }
}

describe('registry/pull-secret: ensurePullSecret', () => {
  const NS = 'porch-fn-system'

  it('creates the secret, leaves it alone when equal, and replaces the data when it changed', async () => {
    const fake = new FakeSecrets()
    expect(await ensurePullSecret(fake.api(), NS, 'auth-secret', CONFIG_JSON)).to.equal('created')
    expect(await ensurePullSecret(fake.api(), NS, 'auth-secret', CONFIG_JSON)).to.equal('unchanged')
    const changed = CONFIG_JSON.replace('5000', '5001')
    fake.store.get(`${NS}/auth-secret`)!.metadata!.labels = {keep: 'me'}
    expect(await ensurePullSecret(fake.api(), NS, 'auth-secret', changed)).to.equal('updated')
    const stored = fake.store.get(`${NS}/auth-secret`)!
    expect(stored.type).to.equal(DOCKER_CONFIG_JSON_TYPE)
    expect(Buffer.from(stored.data![DOCKER_CONFIG_JSON_KEY]!, 'base64').toString()).to.equal(changed)
    expect(stored.metadata!.labels).to.deep.equal({keep: 'me'})
    expect(fake.calls).to.deep.equal([
      `read ${NS}/auth-secret`,
      `create ${NS}/auth-secret`,
      `read ${NS}/auth-secret`,
      `read ${NS}/auth-secret`,
      `replace ${NS}/auth-secret`,
    ])
  })

  it('recovers once from a create race (409) and from a replace conflict (409)', async () => {
    const fake = new FakeSecrets()
    fake.failures.create = [
      {
        code: 409,
        message: 'already exists',
        before: () => fake.store.set(`${NS}/s`, {type: DOCKER_CONFIG_JSON_TYPE, metadata: {name: 's', namespace: NS, resourceVersion: '50'}, data: {[DOCKER_CONFIG_JSON_KEY]: b64('{}')}}),
      },
    ]
    expect(await ensurePullSecret(fake.api(), NS, 's', CONFIG_JSON)).to.equal('updated')
    const fake2 = new FakeSecrets()
    await ensurePullSecret(fake2.api(), NS, 's', '{"auths":{}}')
    fake2.failures.replace = [{code: 409, message: 'modified'}]
    expect(await ensurePullSecret(fake2.api(), NS, 's', CONFIG_JSON)).to.equal('updated')
    expect(fake2.calls.filter((c) => c.startsWith('replace'))).to.have.length(2)
  })

  it('maps API errors to kinds and refuses to retype an existing secret', async () => {
    const fake = new FakeSecrets()
    fake.failures.read = [{code: 403, message: 'secrets "s" is forbidden: User "system:serviceaccount:x" cannot get resource "secrets"'}]
    const denied = await ensurePullSecret(fake.api(), NS, 's', CONFIG_JSON).then(
      () => undefined,
      (e: unknown) => e as FnrError,
    )
    expect(denied?.kind).to.equal('PermissionDenied')
    expect(denied?.message).to.match(/^cannot read Secret porch-fn-system\/s: secrets "s" is forbidden/)

    fake.store.set(`${NS}/opaque`, {type: 'Opaque', metadata: {name: 'opaque', namespace: NS, resourceVersion: '1'}, data: {}})
    const retype = await ensurePullSecret(fake.api(), NS, 'opaque', CONFIG_JSON).then(
      () => undefined,
      (e: unknown) => e as FnrError,
    )
    expect(retype?.kind).to.equal('FailedPrecondition')
    expect(retype?.message).to.match(/exists with type Opaque/)
  })

  describe('with @kubernetes/client-node 1.4 CoreV1Api against a minimal API server', () => {
    let server: http.Server
    let api: CoreV1Api
    const secrets = new Map<string, V1Secret>()
    const seen: string[] = []
    let rv = 100

    before(async () => {
      server = http.createServer((req, res) => {
        const chunks: Buffer[] = []
        req.on('data', (c: Buffer) => chunks.push(c))
        req.on('end', () => {
          const url = new URL(req.url ?? '/', 'http://x')
          seen.push(`${req.method} ${url.pathname}`)
          const m = /^\/api\/v1\/namespaces\/([^/]+)\/secrets(?:\/([^/]+))?$/.exec(url.pathname)
          const send = (code: number, body: unknown): void => {
            res.writeHead(code, {'content-type': 'application/json'})
            res.end(JSON.stringify(body))
          }
          const status = (code: number, reason: string, message: string): void =>
            send(code, {kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code})
          if (m === null) return status(404, 'NotFound', 'the server could not find the requested resource')
          const [, ns, name] = m
          if (name === 'forbidden') return status(403, 'Forbidden', `secrets "forbidden" is forbidden: User "system:serviceaccount:porch-system:porch-fn-runner" cannot get resource "secrets"`)
          const body = chunks.length > 0 ? (JSON.parse(Buffer.concat(chunks).toString()) as V1Secret) : undefined
          if (req.method === 'GET' && name !== undefined) {
            const s = secrets.get(`${ns}/${name}`)
            return s === undefined ? status(404, 'NotFound', `secrets "${name}" not found`) : send(200, s)
          }
          if (req.method === 'POST' && name === undefined && body !== undefined) {
            const key = `${ns}/${body.metadata!.name}`
            if (secrets.has(key)) return status(409, 'AlreadyExists', `secrets "${body.metadata!.name}" already exists`)
            const stored = {...body, metadata: {...body.metadata, namespace: ns, resourceVersion: String(rv++), uid: 'u-1'}}
            secrets.set(key, stored)
            return send(201, stored)
          }
          if (req.method === 'PUT' && name !== undefined && body !== undefined) {
            const current = secrets.get(`${ns}/${name}`)
            if (current === undefined) return status(404, 'NotFound', `secrets "${name}" not found`)
            if (body.metadata?.resourceVersion !== current.metadata?.resourceVersion) return status(409, 'Conflict', 'the object has been modified')
            const stored = {...body, metadata: {...body.metadata, resourceVersion: String(rv++)}}
            secrets.set(`${ns}/${name}`, stored)
            return send(200, stored)
          }
          return status(405, 'MethodNotAllowed', 'no')
        })
      })
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
      const k8s = await import('@kubernetes/client-node')
      const kc = new k8s.KubeConfig()
      kc.loadFromOptions({
        clusters: [{name: 'fake', server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true}],
        users: [{name: 'u', token: 'test-token'}],
        contexts: [{name: 'fake', cluster: 'fake', user: 'u', namespace: NS}],
        currentContext: 'fake',
      })
      api = kc.makeApiClient(k8s.CoreV1Api)
    })

    after(async () => {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    })

    it('creates, keeps and updates the secret through the real client', async () => {
      expect(await ensurePullSecret(api, NS, 'auth-secret', CONFIG_JSON)).to.equal('created')
      expect(await ensurePullSecret(api, NS, 'auth-secret', CONFIG_JSON)).to.equal('unchanged')
      expect(await ensurePullSecret(api, NS, 'auth-secret', '{"auths":{}}')).to.equal('updated')
      const stored = secrets.get(`${NS}/auth-secret`)!
      expect(stored.type).to.equal(DOCKER_CONFIG_JSON_TYPE)
      expect(Buffer.from(stored.data![DOCKER_CONFIG_JSON_KEY]!, 'base64').toString()).to.equal('{"auths":{}}')
      expect(seen).to.deep.equal([
        `GET /api/v1/namespaces/${NS}/secrets/auth-secret`,
        `POST /api/v1/namespaces/${NS}/secrets`,
        `GET /api/v1/namespaces/${NS}/secrets/auth-secret`,
        `GET /api/v1/namespaces/${NS}/secrets/auth-secret`,
        `PUT /api/v1/namespaces/${NS}/secrets/auth-secret`,
      ])
    })

    it('reports a refusal from the API server as PermissionDenied with its message', async () => {
      const err = await ensurePullSecret(api, NS, 'forbidden', CONFIG_JSON).then(
        () => undefined,
        (e: unknown) => e as FnrError,
      )
      expect(err).to.be.instanceOf(FnrError)
      expect(err!.kind).to.equal('PermissionDenied')
      expect(err!.message).to.equal(
        `cannot read Secret ${NS}/forbidden: secrets "forbidden" is forbidden: User "system:serviceaccount:porch-system:porch-fn-runner" cannot get resource "secrets"`,
      )
    })
  })
})
