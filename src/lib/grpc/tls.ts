/**
 * Optional TLS and mutual TLS for the `fnr serve` listener, and the matching client credentials.
 *
 * Plaintext (h2c) stays the default, as Porch's porch-server dials the function runner without
 * TLS. With --tls-cert-file and --tls-key-file the listener (EvaluateFunction and grpc.health.v1
 * alike, one port) speaks TLS only; --tls-client-ca-file also requires every client to present a
 * certificate signed by one of the CAs in that file.
 *
 * The files are read and checked once, at startup: each problem (missing or unreadable file, not
 * a regular file (a FIFO would block the start), over 4 MiB, not PEM, a key that does not belong
 * to the certificate, a client CA without a server certificate) is one FnrError('Config') line
 * naming the flag and the file.
 */
import {X509Certificate, createPrivateKey, type KeyObject} from 'node:crypto'

import * as grpc from '@grpc/grpc-js'

import {readConfigFile} from '../read-file.js'
import {FnrError} from '../errors.js'

export interface ListenerTlsFiles {
  /** --tls-cert-file: the server certificate (chain), PEM. */
  certFile?: string
  /** --tls-key-file: its private key, PEM. */
  keyFile?: string
  /** --tls-client-ca-file: CA certificates (PEM) that client certificates must chain to; set, clients must present one. */
  clientCaFile?: string
}

export interface ListenerTls {
  credentials: grpc.ServerCredentials
  /** "tls" or "mtls", for the startup log line. */
  mode: 'tls' | 'mtls'
}

const FLAG = {certFile: '--tls-cert-file', keyFile: '--tls-key-file', clientCaFile: '--tls-client-ca-file'} as const

/** True when any listener TLS file is set. */
export function listenerTlsRequested(files: ListenerTlsFiles | undefined): boolean {
  return Boolean(files && (files.certFile || files.keyFile || files.clientCaFile))
}

/** Checks which flags go together (no file access); throws FnrError('Usage'). */
export function validateListenerTlsFlags(files: ListenerTlsFiles | undefined): void {
  if (!listenerTlsRequested(files)) return
  const {certFile, keyFile, clientCaFile} = files!
  if (certFile && !keyFile) throw new FnrError('Usage', `${FLAG.certFile} needs ${FLAG.keyFile} (the certificate's private key)`)
  if (keyFile && !certFile) throw new FnrError('Usage', `${FLAG.keyFile} needs ${FLAG.certFile} (the server certificate)`)
  if (clientCaFile && !certFile) throw new FnrError('Usage', `${FLAG.clientCaFile} needs ${FLAG.certFile} and ${FLAG.keyFile}: client certificates are only checked over TLS`)
}

/**
 * Awaits every read at once, then fails with the first failure in the order given, not the first
 * to settle: with several bad files the error line must not depend on which read the disk answered
 * first (a loaded machine reordered them and the line changed from run to run).
 */
async function allInOrder<T extends readonly unknown[]>(reads: {[K in keyof T]: Promise<T[K]>}): Promise<T> {
  const settled = await Promise.allSettled(reads)
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected')
  if (failed) throw failed.reason
  return settled.map((r) => (r as PromiseFulfilledResult<unknown>).value) as unknown as T
}

async function readPem(flag: string, file: string): Promise<Buffer> {
  // A regular file of a sane size only: a FIFO used to hang the start (read-file.ts).
  const data = await readConfigFile(file, {label: `${flag} ${file} cannot be read`})
  if (!data.includes('-----BEGIN ')) throw new FnrError('Config', `${flag} ${file} is not a PEM file (no "-----BEGIN" line)`)
  return data
}

/** The PEM certificate blocks of a bundle, each parsed; throws on none or on a broken one. */
function parseCertificates(flag: string, file: string, pem: Buffer): X509Certificate[] {
  const blocks = pem.toString('latin1').match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? []
  if (blocks.length === 0) throw new FnrError('Config', `${flag} ${file} holds no PEM certificate (no "-----BEGIN CERTIFICATE-----" block)`)
  return blocks.map((block, i) => {
    try {
      return new X509Certificate(block)
    } catch (err) {
      throw new FnrError('Config', `${flag} ${file}: certificate ${i + 1} cannot be parsed: ${(err as Error).message}`, {cause: err})
    }
  })
}

function parseKey(file: string, pem: Buffer): KeyObject {
  try {
    return createPrivateKey(pem)
  } catch (err) {
    const encrypted = /ENCRYPTED/.test(pem.toString('latin1'))
    throw new FnrError('Config', `${FLAG.keyFile} ${file} is not a usable private key${encrypted ? ' (it is encrypted; give an unencrypted key)' : `: ${(err as Error).message}`}`, {cause: err})
  }
}

/**
 * Reads and checks the listener's TLS files and builds the gRPC server credentials; undefined when
 * no TLS flag is set (plaintext, the default).
 */
export async function loadListenerTls(files: ListenerTlsFiles | undefined): Promise<ListenerTls | undefined> {
  validateListenerTlsFlags(files)
  if (!listenerTlsRequested(files)) return undefined
  const {certFile, keyFile, clientCaFile} = files as Required<Pick<ListenerTlsFiles, 'certFile' | 'keyFile'>> & ListenerTlsFiles
  const [certPem, keyPem, caPem] = await allInOrder<[Buffer, Buffer, Buffer | undefined]>([
    readPem(FLAG.certFile, certFile),
    readPem(FLAG.keyFile, keyFile),
    clientCaFile ? readPem(FLAG.clientCaFile, clientCaFile) : Promise.resolve(undefined),
  ])
  const [leaf] = parseCertificates(FLAG.certFile, certFile, certPem)
  const key = parseKey(keyFile, keyPem)
  if (!leaf!.checkPrivateKey(key)) {
    throw new FnrError('Config', `${FLAG.keyFile} ${keyFile} does not belong to the certificate in ${FLAG.certFile} ${certFile} (${leaf!.subject.replace(/\n/g, ', ')})`)
  }
  const now = Date.now()
  if (Date.parse(leaf!.validTo) < now) throw new FnrError('Config', `${FLAG.certFile} ${certFile} expired on ${leaf!.validTo}`)
  if (caPem) parseCertificates(FLAG.clientCaFile, clientCaFile!, caPem)
  const credentials = grpc.ServerCredentials.createSsl(caPem ?? null, [{cert_chain: certPem, private_key: keyPem}], caPem !== undefined)
  return {credentials, mode: caPem ? 'mtls' : 'tls'}
}

export interface ClientTlsFiles {
  /** CA certificates that the server's certificate must chain to; default the system roots. */
  caFile?: string
  /** A client certificate and its key, for servers that require one (mTLS). */
  certFile?: string
  keyFile?: string
}

/** Channel credentials for a TLS listener, from files (tests, tools, other runners' clients). */
export async function loadClientCredentials(files: ClientTlsFiles): Promise<grpc.ChannelCredentials> {
  if (Boolean(files.certFile) !== Boolean(files.keyFile)) throw new FnrError('Usage', 'a client certificate needs its key, and a key its certificate')
  const read = async (file: string | undefined, what: string): Promise<Buffer | null> => {
    if (!file) return null
    return readConfigFile(file, {label: `${what} ${file} cannot be read`})
  }
  const [ca, cert, key] = await allInOrder<[Buffer | null, Buffer | null, Buffer | null]>([read(files.caFile, 'CA file'), read(files.certFile, 'client certificate'), read(files.keyFile, 'client key')])
  return grpc.credentials.createSsl(ca, key, cert)
}
