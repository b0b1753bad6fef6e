/** Certificates made with openssl at test time: a CA, a server certificate for 127.0.0.1, a JWT signer. */
import {readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {execa} from 'execa'

import {requireTool} from './tools.js'

export interface CertificateAuthority {
  certFile: string
  keyFile: string
  certPem: string
}

export interface KeyPair {
  certFile: string
  keyFile: string
  certPem: string
  keyPem: string
}

async function openssl(args: string[], cwd: string): Promise<void> {
  await execa(requireTool('openssl'), args, {cwd, stdin: 'ignore'})
}

export async function makeCa(dir: string, name = 'ca', subject = '/CN=fnr test registry CA'): Promise<CertificateAuthority> {
  const certFile = path.join(dir, `${name}.crt`)
  const keyFile = path.join(dir, `${name}.key`)
  await openssl(
    ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyFile, '-out', certFile, '-days', '2', '-subj', subject,
      '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'],
    dir,
  )
  return {certFile, keyFile, certPem: await readFile(certFile, 'utf8')}
}

/** A server certificate for 127.0.0.1 and localhost, signed by the CA. */
export async function makeServerCert(dir: string, ca: CertificateAuthority, name = 'server'): Promise<KeyPair> {
  const keyFile = path.join(dir, `${name}.key`)
  const csrFile = path.join(dir, `${name}.csr`)
  const certFile = path.join(dir, `${name}.crt`)
  const extFile = path.join(dir, `${name}.ext`)
  await writeFile(extFile, 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n')
  await openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyFile, '-out', csrFile, '-subj', '/CN=localhost'], dir)
  await openssl(['x509', '-req', '-in', csrFile, '-CA', ca.certFile, '-CAkey', ca.keyFile, '-CAcreateserial', '-out', certFile, '-days', '2', '-extfile', extFile], dir)
  return {certFile, keyFile, certPem: await readFile(certFile, 'utf8'), keyPem: await readFile(keyFile, 'utf8')}
}

/** A self-signed key pair for signing registry tokens (the registry's rootcertbundle is its certificate). */
export async function makeSigner(dir: string, name = 'signer'): Promise<KeyPair> {
  const certFile = path.join(dir, `${name}.crt`)
  const keyFile = path.join(dir, `${name}.key`)
  await openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyFile, '-out', certFile, '-days', '2', '-subj', `/CN=fnr test token ${name}`], dir)
  return {certFile, keyFile, certPem: await readFile(certFile, 'utf8'), keyPem: await readFile(keyFile, 'utf8')}
}
