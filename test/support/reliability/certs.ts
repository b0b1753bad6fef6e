/**
 * Certificates for the listener TLS tests, made with the real openssl: CAs (the registry harness's
 * makeCa), a server certificate for 127.0.0.1, and client certificates (extendedKeyUsage
 * clientAuth) signed by a given CA.
 */
import {readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {execa} from 'execa'

import {makeCa, makeServerCert, type CertificateAuthority, type KeyPair} from '../registry/certs.js'
import {requireTool} from '../registry/tools.js'

export {makeCa, makeServerCert, type CertificateAuthority, type KeyPair}

async function openssl(args: string[], cwd: string): Promise<void> {
  await execa(requireTool('openssl'), args, {cwd, stdin: 'ignore'})
}

/** A client certificate (CN=name, clientAuth) signed by the CA. */
export async function makeClientCert(dir: string, ca: CertificateAuthority, name: string): Promise<KeyPair> {
  const keyFile = path.join(dir, `${name}.key`)
  const csrFile = path.join(dir, `${name}.csr`)
  const certFile = path.join(dir, `${name}.crt`)
  const extFile = path.join(dir, `${name}.ext`)
  await writeFile(extFile, 'extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n')
  await openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyFile, '-out', csrFile, '-subj', `/CN=${name}`], dir)
  await openssl(['x509', '-req', '-in', csrFile, '-CA', ca.certFile, '-CAkey', ca.keyFile, '-CAcreateserial', '-out', certFile, '-days', '2', '-extfile', extFile], dir)
  return {certFile, keyFile, certPem: await readFile(certFile, 'utf8'), keyPem: await readFile(keyFile, 'utf8')}
}

export interface ListenerPki {
  /** Signs the server certificate and the trusted client certificate. */
  ca: CertificateAuthority
  /** An unrelated CA (a client certificate from it must be refused). */
  otherCa: CertificateAuthority
  server: KeyPair
  client: KeyPair
  strangerClient: KeyPair
}

export async function makeListenerPki(dir: string): Promise<ListenerPki> {
  const [ca, otherCa] = await Promise.all([makeCa(dir, 'ca', '/CN=fnr test listener CA'), makeCa(dir, 'other-ca', '/CN=fnr test other CA')])
  // One CA's certificates one after the other (openssl -CAcreateserial writes the CA's .srl file).
  const signedByCa = (async () => ({server: await makeServerCert(dir, ca, 'server'), client: await makeClientCert(dir, ca, 'porch-server')}))()
  const [{server, client}, strangerClient] = await Promise.all([signedByCa, makeClientCert(dir, otherCa, 'stranger')])
  return {ca, otherCa, server, client, strangerClient}
}
