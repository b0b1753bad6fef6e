/**
 * Custom certificate authorities for registries.
 *
 * A custom CA is *added* to the system roots (Porch replaces them, so a registry with a public
 * certificate stops working once a CA is configured; fnr keeps both). Node's global fetch cannot
 * take a CA per request, so the registry client passes the list returned by trustedCertificates()
 * as the `ca` option of its own https agent.
 */
import {X509Certificate} from 'node:crypto'
import {readFileSync} from 'node:fs'
import {stat} from 'node:fs/promises'
import path from 'node:path'
import tls from 'node:tls'

import {readConfigFile} from '../read-file.js'
import {FnrError} from '../errors.js'

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g

/**
 * Reads a PEM file of one or more CA certificates. Throws FnrError('Config') when the file is
 * missing, unreadable, not a regular file, over 4 MiB, or holds no parseable certificate.
 */
export async function loadCaFile(file: string): Promise<string> {
  // A regular file of a sane size only: a FIFO would block, a device never end (read-file.ts).
  const text = await readConfigFile(file, {
    label: `CA file ${file} cannot be read`,
    message: (p) => `CA file ${file} ${p.code === 'ENOENT' ? 'does not exist' : p.code === 'EISDIR' ? 'is a directory' : `cannot be read: ${p.reason}`}`,
  })
  return validatePem(text.toString('utf8'), file)
}

/** Checks that PEM text holds at least one valid certificate; returns just the certificates. */
export function validatePem(text: string, source: string): string {
  const blocks = text.match(PEM_CERTIFICATE) ?? []
  if (blocks.length === 0) throw new FnrError('Config', `CA file ${source}: failed to append certificates from PEM (no certificate found)`)
  for (const block of blocks) {
    try {
      new X509Certificate(block)
    } catch (err) {
      throw new FnrError('Config', `CA file ${source}: failed to append certificates from PEM (${(err as Error).message})`, {cause: err})
    }
  }
  return `${blocks.join('\n')}\n`
}

/**
 * Reads the CA from a --tls-secret-path directory as Porch does: ca.crt, else ca.pem.
 * Returns the file used and its certificates.
 */
export async function loadCaFromDirectory(dir: string): Promise<{file: string; pem: string}> {
  try {
    const s = await stat(dir)
    if (!s.isDirectory()) throw new FnrError('Config', `TLS secret path ${dir} is not a directory`)
  } catch (err) {
    if (err instanceof FnrError) throw err
    throw new FnrError('Config', `TLS secret path ${dir} does not exist`, {cause: err})
  }
  const errors: string[] = []
  for (const name of ['ca.crt', 'ca.pem']) {
    const file = path.join(dir, name)
    try {
      await stat(file)
    } catch (err) {
      errors.push(`${name} not found`)
      continue
    }
    return {file, pem: await loadCaFile(file)}
  }
  throw new FnrError('Config', `TLS secret path ${dir}: ${errors.join(', and ')}`)
}

let extraCaCache: string[] | undefined

/** Certificates from NODE_EXTRA_CA_CERTS, which an explicit `ca` option would otherwise drop. */
function extraCaFromEnvironment(): string[] {
  if (extraCaCache !== undefined) return extraCaCache
  extraCaCache = []
  const file = process.env.NODE_EXTRA_CA_CERTS
  if (file) {
    try {
      extraCaCache = readFileSync(file, 'utf8').match(PEM_CERTIFICATE) ?? []
    } catch {
      // Node itself only warns about an unreadable NODE_EXTRA_CA_CERTS; do the same (silently).
    }
  }
  return extraCaCache
}

/**
 * The CA list for an https agent: the system roots, NODE_EXTRA_CA_CERTS, and the custom CAs.
 * Returns undefined when there are no custom CAs, so Node's defaults apply unchanged.
 */
export function trustedCertificates(customCas: readonly string[]): string[] | undefined {
  if (customCas.length === 0) return undefined
  return [...tls.rootCertificates, ...extraCaFromEnvironment(), ...customCas]
}

const CERT_ERROR_CODES = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_SIGNATURE_FAILURE',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'HOSTNAME_MISMATCH',
])

/** True when a socket error is a certificate verification failure (not worth retrying). */
export function isCertificateError(err: unknown): boolean {
  const code = (err as {code?: unknown} | null)?.code
  return typeof code === 'string' && CERT_ERROR_CODES.has(code)
}

/** True when a TLS handshake failed because the server speaks plain HTTP (or not TLS at all). */
export function isTlsProtocolError(err: unknown): boolean {
  // OpenSSL's reasons arrive as codes (ERR_SSL_WRONG_VERSION_NUMBER, ERR_SSL_HTTP_REQUEST, …).
  const code = (err as {code?: unknown} | null)?.code
  return typeof code === 'string' && (code === 'EPROTO' || code.startsWith('ERR_SSL_'))
}
