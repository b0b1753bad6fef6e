/**
 * TLS and mutual TLS on the `fnr serve` listener (--tls-cert-file, --tls-key-file,
 * --tls-client-ca-file), with certificates made by the real openssl. Plaintext stays the default
 * (Porch dials the runner without TLS); with TLS on, EvaluateFunction and grpc.health.v1 share the
 * one TLS port and a plaintext client is refused; with a client CA, only clients presenting a
 * certificate from that CA get through.
 */
import {execFile, execFileSync} from 'node:child_process'
import {writeFile} from 'node:fs/promises'
import path from 'node:path'
import {promisify} from 'node:util'

import * as grpc from '@grpc/grpc-js'
import * as protoLoader from '@grpc/proto-loader'
import {expect} from 'chai'
import {protoPath} from 'grpc-health-check'

import {FnrError} from '../../src/lib/errors.js'
import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {loadClientCredentials, loadListenerTls, type ListenerTlsFiles} from '../../src/lib/grpc/tls.js'
import type {RunningServer} from '../../src/lib/serve.js'
import {makeListenerPki, type ListenerPki} from '../support/reliability/certs.js'
import {freePort, startServeChild} from '../support/reliability/serve-process.js'
import {BIN_RUN, makeFunctionsDir, serveOptions, startInProcess} from '../support/serve.js'
import {TempDirs} from '../support/tmp.js'

const RL = Buffer.from('apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: tls\n')
const CAT = 'example.com/cat:v1'

type HealthClient = grpc.Client & {check(req: {service: string}, options: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res?: {status: string}) => void): void}

function healthOver(address: string, credentials: grpc.ChannelCredentials): HealthClient {
  const def = protoLoader.loadSync(protoPath, {keepCase: true, enums: String, defaults: true})
  const pkg = grpc.loadPackageDefinition(def) as unknown as {grpc: {health: {v1: {Health: grpc.ServiceClientConstructor}}}}
  return new pkg.grpc.health.v1.Health(address, credentials, {'grpc.ssl_target_name_override': 'localhost'}) as unknown as HealthClient
}

const check = (client: HealthClient): Promise<string> =>
  new Promise((resolve, reject) => client.check({service: ''}, {deadline: Date.now() + 10_000}, (err, res) => (err ? reject(err) : resolve(res!.status))))

describe('reliability: TLS and mTLS on the fnr serve listener', function () {
  this.timeout(60_000)
  const temp = new TempDirs()
  let pki: ListenerPki
  let fns: {configPath: string; functionsDir: string}
  let dir: string
  const clients: Array<{close(): void}> = []

  before(async () => {
    dir = await temp.make('fnr-tls-')
    pki = await makeListenerPki(dir)
    fns = await makeFunctionsDir(await temp.make())
  })
  after(() => temp.cleanup())
  afterEach(() => {
    for (const c of clients.splice(0)) c.close()
  })

  const client = async (port: number, files: Parameters<typeof loadClientCredentials>[0] | 'plaintext'): Promise<EvaluatorClient> => {
    const credentials = files === 'plaintext' ? grpc.credentials.createInsecure() : await loadClientCredentials(files)
    // The server certificate names 127.0.0.1 and localhost; the name override keeps Node from
    // sending an IP address as the TLS server name (DEP0123).
    const c = new EvaluatorClient(`127.0.0.1:${port}`, {credentials, channelOptions: files === 'plaintext' ? {} : {'grpc.ssl_target_name_override': 'localhost'}})
    clients.push(c)
    return c
  }
  /** The gRPC status code of a call that must fail (a short deadline: a refused handshake is UNAVAILABLE at once). */
  const refused = async (c: EvaluatorClient): Promise<number> => {
    const err = (await c.evaluateRaw(CAT, RL, {deadline: Date.now() + 10_000}).then(
      () => undefined,
      (e: grpc.ServiceError) => e,
    ))!
    expect(err, 'the call must be refused').to.be.an('error')
    return err.code
  }

  async function serve(tls: ListenerTlsFiles | undefined): Promise<RunningServer> {
    return startInProcess({...serveOptions(fns), tls})
  }

  it('plaintext stays the default: no TLS flag, a plaintext client works and a TLS client is refused', async () => {
    const running = await serve(undefined)
    try {
      const res = await (await client(running.port, 'plaintext')).evaluateRaw(CAT, RL)
      expect(res.resourceList.toString()).to.equal(RL.toString())
      expect(await refused(await client(running.port, {caFile: pki.ca.certFile}))).to.equal(grpc.status.UNAVAILABLE)
    } finally {
      await running.stop()
    }
  })

  describe('TLS (server certificate only)', () => {
    let running: RunningServer
    before(async () => {
      running = await serve({certFile: pki.server.certFile, keyFile: pki.server.keyFile})
    })
    after(() => running?.stop())

    it('a client trusting the CA calls EvaluateFunction over TLS', async () => {
      const res = await (await client(running.port, {caFile: pki.ca.certFile})).evaluateRaw(CAT, RL)
      expect(res.resourceList.toString()).to.equal(RL.toString())
      expect(res.trailers.get('fnr-evaluator')).to.deep.equal(['exec'])
    })

    it('grpc.health.v1 is served on the same TLS port (and is SERVING)', async () => {
      const hc = healthOver(`127.0.0.1:${running.port}`, await loadClientCredentials({caFile: pki.ca.certFile}))
      clients.push(hc)
      expect(await check(hc)).to.equal('SERVING')
      const plain = healthOver(`127.0.0.1:${running.port}`, grpc.credentials.createInsecure())
      clients.push(plain)
      const err = await check(plain).then(() => undefined, (e: grpc.ServiceError) => e)
      expect(err?.code, 'plaintext health check refused').to.equal(grpc.status.UNAVAILABLE)
    })

    it('a plaintext client is refused', async () => {
      expect(await refused(await client(running.port, 'plaintext'))).to.equal(grpc.status.UNAVAILABLE)
    })

    it('a client that does not trust the server\'s CA is refused', async () => {
      expect(await refused(await client(running.port, {caFile: pki.otherCa.certFile}))).to.equal(grpc.status.UNAVAILABLE)
    })

    it('does not ask for a client certificate: a client presenting one still works', async () => {
      const res = await (await client(running.port, {caFile: pki.ca.certFile, certFile: pki.strangerClient.certFile, keyFile: pki.strangerClient.keyFile})).evaluateRaw(CAT, RL)
      expect(res.resourceList.toString()).to.equal(RL.toString())
    })
  })

  describe('mutual TLS (--tls-client-ca-file)', () => {
    let running: RunningServer
    before(async () => {
      running = await serve({certFile: pki.server.certFile, keyFile: pki.server.keyFile, clientCaFile: pki.ca.certFile})
    })
    after(() => running?.stop())

    it('a client with a certificate from the client CA works, health included', async () => {
      const files = {caFile: pki.ca.certFile, certFile: pki.client.certFile, keyFile: pki.client.keyFile}
      const res = await (await client(running.port, files)).evaluateRaw(CAT, RL)
      expect(res.resourceList.toString()).to.equal(RL.toString())
      const hc = healthOver(`127.0.0.1:${running.port}`, await loadClientCredentials(files))
      clients.push(hc)
      expect(await check(hc)).to.equal('SERVING')
    })

    it('a client without a certificate is refused', async () => {
      expect(await refused(await client(running.port, {caFile: pki.ca.certFile}))).to.equal(grpc.status.UNAVAILABLE)
    })

    it('a client with a certificate from another CA is refused', async () => {
      const c = await client(running.port, {caFile: pki.ca.certFile, certFile: pki.strangerClient.certFile, keyFile: pki.strangerClient.keyFile})
      expect(await refused(c)).to.equal(grpc.status.UNAVAILABLE)
    })

    it('a plaintext client is refused', async () => {
      expect(await refused(await client(running.port, 'plaintext'))).to.equal(grpc.status.UNAVAILABLE)
    })

    it('the refused clients left the server healthy: the good client still works', async () => {
      const res = await (await client(running.port, {caFile: pki.ca.certFile, certFile: pki.client.certFile, keyFile: pki.client.keyFile})).evaluateRaw(CAT, RL)
      expect(res.resourceList.toString()).to.equal(RL.toString())
    })
  })

  describe('startup errors: one line naming the flag and the file', () => {
    const configError = async (tls: ListenerTlsFiles, kind: 'Config' | 'Usage', text: RegExp): Promise<void> => {
      const err = await loadListenerTls(tls).then(() => undefined, (e: unknown) => e)
      expect(err, JSON.stringify(tls)).to.be.instanceOf(FnrError)
      expect((err as FnrError).kind).to.equal(kind)
      expect((err as FnrError).message).to.match(text)
      expect((err as FnrError).message).not.to.contain('\n')
    }

    it('a missing certificate or key file, a directory, a FIFO (used to hang the start), a device', async () => {
      await configError({certFile: path.join(dir, 'nope.crt'), keyFile: pki.server.keyFile}, 'Config', /^--tls-cert-file .*nope\.crt cannot be read: no such file \(ENOENT\)$/)
      await configError({certFile: pki.server.certFile, keyFile: path.join(dir, 'nope.key')}, 'Config', /^--tls-key-file .*nope\.key cannot be read: no such file \(ENOENT\)$/)
      await configError({certFile: pki.server.certFile, keyFile: pki.server.keyFile, clientCaFile: dir}, 'Config', /^--tls-client-ca-file .* cannot be read: it is a directory \(EISDIR\)$/)
      const fifo = path.join(dir, 'cert.fifo')
      execFileSync('mkfifo', [fifo])
      await configError({certFile: fifo, keyFile: pki.server.keyFile}, 'Config', /^--tls-cert-file .*cert\.fifo cannot be read: not a regular file \(it is a FIFO\)$/)
      await configError({certFile: pki.server.certFile, keyFile: '/dev/zero'}, 'Config', /^--tls-key-file \/dev\/zero cannot be read: not a regular file \(it is a character device\)$/)
    })

    it('files that are not PEM, or a key of another certificate', async () => {
      const junk = path.join(dir, 'junk.pem')
      await writeFile(junk, 'not a certificate\n')
      await configError({certFile: junk, keyFile: pki.server.keyFile}, 'Config', /^--tls-cert-file .*junk\.pem is not a PEM file/)
      await configError({certFile: pki.server.keyFile, keyFile: pki.server.keyFile}, 'Config', /^--tls-cert-file .* holds no PEM certificate/)
      await configError({certFile: pki.server.certFile, keyFile: pki.server.certFile}, 'Config', /^--tls-key-file .* is not a usable private key/)
      await configError({certFile: pki.server.certFile, keyFile: pki.client.keyFile}, 'Config', /^--tls-key-file .*porch-server\.key does not belong to the certificate in --tls-cert-file .*server\.crt/)
      await configError({certFile: pki.server.certFile, keyFile: pki.server.keyFile, clientCaFile: pki.server.keyFile}, 'Config', /^--tls-client-ca-file .* holds no PEM certificate/)
    })

    it('flags that need each other', async () => {
      await configError({certFile: pki.server.certFile}, 'Usage', /^--tls-cert-file needs --tls-key-file/)
      await configError({keyFile: pki.server.keyFile}, 'Usage', /^--tls-key-file needs --tls-cert-file/)
      await configError({clientCaFile: pki.ca.certFile}, 'Usage', /^--tls-client-ca-file needs --tls-cert-file and --tls-key-file/)
    })

    it('the real CLI exits 3 with one error line for a mismatched key, and starts with the right files', async () => {
      const port = await freePort()
      const bad = await promisify(execFile)(process.execPath, [BIN_RUN, 'serve', `--port=${port}`, '--disable-runtimes=pod', `--config=${fns.configPath}`, `--functions=${fns.functionsDir}`, `--tls-cert-file=${pki.server.certFile}`, `--tls-key-file=${pki.client.keyFile}`], {
        env: {...process.env, FNR_BIND_ADDRESS: '127.0.0.1'},
        timeout: 30_000,
      }).then(
        () => undefined,
        (e: {code: number; stderr: string}) => e,
      )
      expect(bad, 'serve must fail').not.to.equal(undefined)
      expect(bad!.code).to.equal(3)
      const lines = bad!.stderr.trim().split('\n')
      expect(lines, bad!.stderr).to.have.length(1)
      expect(lines[0]).to.match(/--tls-key-file .*porch-server\.key does not belong to the certificate/)

      const child = await startServeChild(port, [`--config=${fns.configPath}`, `--functions=${fns.functionsDir}`, `--tls-cert-file=${pki.server.certFile}`, `--tls-key-file=${pki.server.keyFile}`, `--tls-client-ca-file=${pki.ca.certFile}`])
      try {
        expect(child.stderr()).to.match(/"tls":"mtls"/)
        const res = await (await client(port, {caFile: pki.ca.certFile, certFile: pki.client.certFile, keyFile: pki.client.keyFile})).evaluateRaw(CAT, RL)
        expect(res.resourceList.toString()).to.equal(RL.toString())
        expect(await refused(await client(port, {caFile: pki.ca.certFile}))).to.equal(grpc.status.UNAVAILABLE)
      } finally {
        child.child.kill('SIGTERM')
        await child.exited
      }
    })
  })
})
