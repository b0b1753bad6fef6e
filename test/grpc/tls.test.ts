/**
 * The listener's TLS files (src/lib/grpc/tls.ts), in process: each problem is one Config line naming
 * the flag and the file, flags that need each other are Usage errors, and good files give working
 * TLS and mTLS on a loopback grpc-js server. The certificates are made here with node:crypto (ECDSA
 * P-256, DER written by hand): no openssl process. With openssl-made certificates and `fnr serve` as
 * a process: test/reliability/tls.test.ts; unreadable files: test/config/read-file.test.ts.
 */
import {generateKeyPairSync, sign, type KeyObject} from 'node:crypto'
import {writeFile} from 'node:fs/promises'
import path from 'node:path'

import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'
import {HealthImplementation} from 'grpc-health-check'

import {FnrError} from '../../src/lib/errors.js'
import {listenerTlsRequested, loadClientCredentials, loadListenerTls, validateListenerTlsFlags, type ListenerTlsFiles} from '../../src/lib/grpc/tls.js'
import {TempDirs} from '../support/tmp.js'

// --- a minimal X.509 writer (DER) -------------------------------------------------------------

function tlv(tag: number, content: Buffer): Buffer {
  const n = content.length
  const len = n < 0x80 ? Buffer.from([n]) : n < 0x100 ? Buffer.from([0x81, n]) : Buffer.from([0x82, n >> 8, n & 0xff])
  return Buffer.concat([Buffer.from([tag]), len, content])
}
const seq = (...items: Buffer[]): Buffer => tlv(0x30, Buffer.concat(items))
const set = (...items: Buffer[]): Buffer => tlv(0x31, Buffer.concat(items))
/** A small non-negative INTEGER, minimally encoded (DER refuses leading zero bytes). */
function int(n: number): Buffer {
  const bytes = [n & 0xff]
  for (let x = n >> 8; x > 0; x >>= 8) bytes.unshift(x & 0xff)
  if (bytes[0]! & 0x80) bytes.unshift(0)
  return tlv(0x02, Buffer.from(bytes))
}
function oid(dotted: string): Buffer {
  const [a, b, ...rest] = dotted.split('.').map(Number) as [number, number, ...number[]]
  const bytes = [40 * a + b]
  for (const v of rest) {
    const part = [v & 0x7f]
    for (let x = v >> 7; x > 0; x >>= 7) part.unshift((x & 0x7f) | 0x80)
    bytes.push(...part)
  }
  return tlv(0x06, Buffer.from(bytes))
}
const utcTime = (d: Date): Buffer => tlv(0x17, Buffer.from(d.toISOString().replace(/^\d\d(\d\d)-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d).*$/, '$1$2$3$4$5$6Z')))
const name = (cn: string): Buffer => seq(set(seq(oid('2.5.4.3'), tlv(0x0c, Buffer.from(cn)))))
const ECDSA_SHA256 = seq(oid('1.2.840.10045.4.3.2'))

interface Made {
  key: KeyObject
  cn: string
  certPem: string
  keyPem: string
}

/** A certificate for `cn` signed by `issuer` (self-signed without one); CA:true for a CA. */
function makeCert(cn: string, options: {issuer?: Made; ca?: boolean; notAfter?: Date; serial?: number} = {}): Made {
  const {privateKey, publicKey} = generateKeyPairSync('ec', {namedCurve: 'P-256'})
  const extensions = [
    seq(oid('2.5.29.19'), tlv(0x01, Buffer.from([0xff])), tlv(0x04, seq(...(options.ca ? [tlv(0x01, Buffer.from([0xff]))] : [])))),
    seq(oid('2.5.29.17'), tlv(0x04, seq(tlv(0x82, Buffer.from('localhost')), tlv(0x87, Buffer.from([127, 0, 0, 1]))))),
  ]
  const tbs = seq(
    tlv(0xa0, int(2)),
    int(options.serial ?? 1),
    ECDSA_SHA256,
    name(options.issuer?.cn ?? cn),
    seq(utcTime(new Date(Date.now() - 3_600_000)), utcTime(options.notAfter ?? new Date(Date.now() + 86_400_000))),
    name(cn),
    publicKey.export({type: 'spki', format: 'der'}),
    tlv(0xa3, seq(...extensions)),
  )
  const signature = sign('sha256', tbs, options.issuer?.key ?? privateKey)
  const der = seq(tbs, ECDSA_SHA256, tlv(0x03, Buffer.concat([Buffer.from([0]), signature])))
  const certPem = `-----BEGIN CERTIFICATE-----\n${der.toString('base64').replace(/(.{64})/g, '$1\n').replace(/\n?$/, '\n')}-----END CERTIFICATE-----\n`
  return {key: privateKey, cn, certPem, keyPem: privateKey.export({type: 'pkcs8', format: 'pem'}) as string}
}

// --- tests ------------------------------------------------------------------------------------

async function rejection(p: Promise<unknown>, kind: 'Config' | 'Usage'): Promise<string> {
  const err = await p.then(() => undefined, (e: unknown) => e)
  expect(err).to.be.instanceOf(FnrError)
  expect((err as FnrError).kind).to.equal(kind)
  expect((err as FnrError).message, 'one line').to.not.contain('\n')
  return (err as FnrError).message
}

function checkOver(port: number, credentials: grpc.ChannelCredentials): Promise<Buffer | grpc.ServiceError> {
  const client = new grpc.Client(`localhost:${port}`, credentials)
  return new Promise<Buffer | grpc.ServiceError>((resolve) => {
    client.makeUnaryRequest('/grpc.health.v1.Health/Check', (b: Buffer) => b, (b: Buffer) => b, Buffer.alloc(0), {deadline: Date.now() + 3000}, (err, res) => resolve(err ?? res!))
  }).finally(() => client.close())
}

describe('listener TLS files (--tls-cert-file, --tls-key-file, --tls-client-ca-file)', function () {
  this.timeout(10_000)
  const temp = new TempDirs()
  let dir: string
  const files: Record<string, string> = {}
  let ca: Made
  let server: Made
  let client: Made

  before(async () => {
    dir = await temp.make('fnr-tls-unit-')
    ca = makeCert('fnr test CA', {ca: true})
    server = makeCert('fnr-server', {issuer: ca, serial: 2})
    client = makeCert('porch-server', {issuer: ca, serial: 3})
    const expired = makeCert('old', {notAfter: new Date(Date.now() - 60_000)})
    const other = makeCert('other')
    const write = async (key: string, content: string): Promise<void> => {
      files[key] = path.join(dir, key)
      await writeFile(files[key], content)
    }
    await Promise.all([
      write('ca.crt', ca.certPem),
      write('server.crt', server.certPem + ca.certPem),
      write('server.key', server.keyPem),
      write('client.crt', client.certPem),
      write('client.key', client.keyPem),
      write('expired.crt', expired.certPem),
      write('expired.key', expired.keyPem),
      write('other.key', other.keyPem),
      write('text.pem', 'just text\n'),
      write('broken.crt', '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n'),
      write('encrypted.key', server.key.export({type: 'pkcs8', format: 'pem', cipher: 'aes-256-cbc', passphrase: 'secret'}) as string),
    ])
  })
  after(() => temp.cleanup())

  describe('which flags go together', () => {
    it('any file set asks for TLS; none (or empty strings) is plaintext', () => {
      expect(listenerTlsRequested(undefined)).to.equal(false)
      expect(listenerTlsRequested({})).to.equal(false)
      expect(listenerTlsRequested({certFile: '', keyFile: '', clientCaFile: ''})).to.equal(false)
      expect(listenerTlsRequested({clientCaFile: 'ca.crt'})).to.equal(true)
    })

    it('a certificate needs its key, a key its certificate, a client CA both: Usage errors before any file is read', () => {
      const usage = (f: ListenerTlsFiles): string => {
        try {
          validateListenerTlsFlags(f)
        } catch (e) {
          expect(e).to.be.instanceOf(FnrError)
          expect((e as FnrError).kind).to.equal('Usage')
          return (e as FnrError).message
        }
        return expect.fail('expected a Usage error')
      }
      expect(usage({certFile: '/nonexistent/a.crt'})).to.equal("--tls-cert-file needs --tls-key-file (the certificate's private key)")
      expect(usage({keyFile: '/nonexistent/a.key'})).to.equal('--tls-key-file needs --tls-cert-file (the server certificate)')
      expect(usage({keyFile: 'a.key', clientCaFile: 'ca.crt'})).to.equal('--tls-key-file needs --tls-cert-file (the server certificate)')
      expect(usage({clientCaFile: '/nonexistent/ca.crt'})).to.equal('--tls-client-ca-file needs --tls-cert-file and --tls-key-file: client certificates are only checked over TLS')
      expect(() => validateListenerTlsFlags(undefined)).to.not.throw()
      expect(() => validateListenerTlsFlags({certFile: 'a', keyFile: 'b', clientCaFile: 'c'})).to.not.throw()
    })

    it('loadListenerTls is nothing without a flag, and a Usage error before reading the files', async () => {
      expect(await loadListenerTls(undefined)).to.equal(undefined)
      expect(await loadListenerTls({})).to.equal(undefined)
      expect(await rejection(loadListenerTls({certFile: '/nonexistent/a.crt'}), 'Usage')).to.match(/^--tls-cert-file needs --tls-key-file/)
    })
  })

  describe('file problems, one Config line each', () => {
    it('a file that is not PEM', async () => {
      expect(await rejection(loadListenerTls({certFile: files['text.pem']!, keyFile: files['server.key']!}), 'Config')).to.equal(`--tls-cert-file ${files['text.pem']} is not a PEM file (no "-----BEGIN" line)`)
      expect(await rejection(loadListenerTls({certFile: files['server.crt']!, keyFile: files['text.pem']!}), 'Config')).to.equal(`--tls-key-file ${files['text.pem']} is not a PEM file (no "-----BEGIN" line)`)
    })

    it('with a bad certificate and a bad key, the certificate is named (flag order)', async () => {
      expect(await rejection(loadListenerTls({certFile: files['text.pem']!, keyFile: path.join(dir, 'missing.key')}), 'Config')).to.match(/^--tls-cert-file .*text\.pem is not a PEM file/)
    })

    it('PEM without a certificate block, and a block that cannot be parsed', async () => {
      expect(await rejection(loadListenerTls({certFile: files['server.key']!, keyFile: files['server.key']!}), 'Config')).to.equal(`--tls-cert-file ${files['server.key']} holds no PEM certificate (no "-----BEGIN CERTIFICATE-----" block)`)
      expect(await rejection(loadListenerTls({certFile: files['broken.crt']!, keyFile: files['server.key']!}), 'Config')).to.match(/^--tls-cert-file .*broken\.crt: certificate 1 cannot be parsed: /)
    })

    it('a key that is not a key, and an encrypted key (said as such)', async () => {
      expect(await rejection(loadListenerTls({certFile: files['server.crt']!, keyFile: files['ca.crt']!}), 'Config')).to.match(/^--tls-key-file .*ca\.crt is not a usable private key: /)
      expect(await rejection(loadListenerTls({certFile: files['server.crt']!, keyFile: files['encrypted.key']!}), 'Config')).to.equal(`--tls-key-file ${files['encrypted.key']} is not a usable private key (it is encrypted; give an unencrypted key)`)
    })

    it('a key of another certificate names both files and the certificate\'s subject', async () => {
      expect(await rejection(loadListenerTls({certFile: files['server.crt']!, keyFile: files['other.key']!}), 'Config')).to.equal(`--tls-key-file ${files['other.key']} does not belong to the certificate in --tls-cert-file ${files['server.crt']} (CN=fnr-server)`)
    })

    it('an expired certificate says when it expired', async () => {
      expect(await rejection(loadListenerTls({certFile: files['expired.crt']!, keyFile: files['expired.key']!}), 'Config')).to.match(/^--tls-cert-file .*expired\.crt expired on \w{3} +\d+ \d\d:\d\d:\d\d \d{4} GMT$/)
    })

    it('a client CA file without a certificate, or with a broken one', async () => {
      const base = {certFile: files['server.crt']!, keyFile: files['server.key']!}
      expect(await rejection(loadListenerTls({...base, clientCaFile: files['server.key']!}), 'Config')).to.match(/^--tls-client-ca-file .*server\.key holds no PEM certificate/)
      expect(await rejection(loadListenerTls({...base, clientCaFile: files['broken.crt']!}), 'Config')).to.match(/^--tls-client-ca-file .*broken\.crt: certificate 1 cannot be parsed/)
      expect(await rejection(loadListenerTls({...base, clientCaFile: files['text.pem']!}), 'Config')).to.match(/^--tls-client-ca-file .*text\.pem is not a PEM file/)
    })
  })

  describe('client credentials files', () => {
    it('a certificate needs its key and a key its certificate (Usage)', async () => {
      for (const f of [{certFile: files['client.crt']!}, {keyFile: files['client.key']!}]) {
        expect(await rejection(loadClientCredentials(f), 'Usage')).to.equal('a client certificate needs its key, and a key its certificate')
      }
    })

    it('names the file that cannot be read: CA file, client certificate, client key', async () => {
      const missing = path.join(dir, 'missing.pem')
      expect(await rejection(loadClientCredentials({caFile: missing}), 'Config')).to.equal(`CA file ${missing} cannot be read: no such file (ENOENT)`)
      expect(await rejection(loadClientCredentials({certFile: missing, keyFile: files['client.key']!}), 'Config')).to.equal(`client certificate ${missing} cannot be read: no such file (ENOENT)`)
      expect(await rejection(loadClientCredentials({certFile: files['client.crt']!, keyFile: missing}), 'Config')).to.equal(`client key ${missing} cannot be read: no such file (ENOENT)`)
    })

    it('no file at all is TLS with the system roots', async () => {
      const creds = await loadClientCredentials({})
      expect(creds).to.be.instanceOf(grpc.ChannelCredentials)
      expect(creds._isSecure()).to.equal(true)
    })
  })

  describe('serving with the files', () => {
    const servers: grpc.Server[] = []
    async function listen(tls: ListenerTlsFiles): Promise<{port: number; mode: string}> {
      const loaded = (await loadListenerTls(tls))!
      const s = new grpc.Server()
      servers.push(s)
      new HealthImplementation({'': 'SERVING'}).addToServer(s)
      const port = await new Promise<number>((resolve, reject) => s.bindAsync('127.0.0.1:0', loaded.credentials, (e, p) => (e ? reject(e) : resolve(p))))
      return {port, mode: loaded.mode}
    }
    after(() => servers.forEach((s) => s.forceShutdown()))

    it('TLS: a client trusting the CA is served; a plaintext client is not', async () => {
      const {port, mode} = await listen({certFile: files['server.crt']!, keyFile: files['server.key']!})
      expect(mode).to.equal('tls')
      expect(await checkOver(port, await loadClientCredentials({caFile: files['ca.crt']!}))).to.deep.equal(Buffer.from([0x08, 0x01]))
      const plain = (await checkOver(port, grpc.credentials.createInsecure())) as grpc.ServiceError
      expect(plain.code).to.equal(grpc.status.UNAVAILABLE)
    })

    it('mTLS: a client with a certificate of the client CA is served; one without is refused', async () => {
      const {port, mode} = await listen({certFile: files['server.crt']!, keyFile: files['server.key']!, clientCaFile: files['ca.crt']!})
      expect(mode).to.equal('mtls')
      expect(await checkOver(port, await loadClientCredentials({caFile: files['ca.crt']!, certFile: files['client.crt']!, keyFile: files['client.key']!}))).to.deep.equal(Buffer.from([0x08, 0x01]))
      const anonymous = (await checkOver(port, await loadClientCredentials({caFile: files['ca.crt']!}))) as grpc.ServiceError
      expect(anonymous.code).to.equal(grpc.status.UNAVAILABLE)
    })
  })
})
