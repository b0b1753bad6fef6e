/**
 * A throwaway CA and a server certificate for 127.0.0.1/localhost, made with the openssl CLI.
 * Generated once per process and kept in memory; the temp dir used by openssl is removed at once.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface TlsMaterial {
  /** PEM of the CA that signed `cert` (what a kubeconfig's certificate-authority-data holds). */
  ca: string;
  cert: string;
  key: string;
}

let cached: Promise<TlsMaterial> | undefined;

export function testTlsMaterial(): Promise<TlsMaterial> {
  cached ??= generate().catch((e: unknown) => {
    cached = undefined;
    throw e;
  });
  return cached;
}

async function generate(): Promise<TlsMaterial> {
  const dir = await mkdtemp(join(tmpdir(), 'fnr-k8s-tls-'));
  try {
    const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
    await run('openssl', [
      'req', '-x509', ...ec, '-keyout', join(dir, 'ca.key'), '-out', join(dir, 'ca.crt'), '-days', '7',
      '-subj', '/CN=fnr-test-ca', '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign',
    ]);
    await run('openssl', ['req', ...ec, '-keyout', join(dir, 'server.key'), '-out', join(dir, 'server.csr'), '-subj', '/CN=127.0.0.1']);
    await writeFile(
      join(dir, 'ext.cnf'),
      'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n',
    );
    await run('openssl', [
      'x509', '-req', '-in', join(dir, 'server.csr'), '-CA', join(dir, 'ca.crt'), '-CAkey', join(dir, 'ca.key'), '-CAcreateserial',
      '-out', join(dir, 'server.crt'), '-days', '7', '-extfile', join(dir, 'ext.cnf'),
    ]);
    const [ca, cert, key] = await Promise.all(['ca.crt', 'server.crt', 'server.key'].map((f) => readFile(join(dir, f), 'utf8')));
    return { ca: ca!, cert: cert!, key: key! };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
