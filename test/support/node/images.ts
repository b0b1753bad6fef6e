/**
 * The node's image store: pulls an image from a registry with skopeo (into a per-pull OCI layout,
 * honouring the pod's imagePullSecrets), then unpacks its layers in order into a root filesystem
 * cached per manifest digest, applying OCI whiteouts (`.wh.<name>` deletes <name> from the lower
 * layers, `.wh..wh..opq` empties its directory) before each layer is extracted with GNU tar.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { lstat, mkdir, mkdtemp, readFile, readdir, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';

import { must, run } from './runc.js';

export interface ImageConfig {
  Entrypoint?: string[] | null;
  Cmd?: string[] | null;
  Env?: string[] | null;
  WorkingDir?: string;
  User?: string;
}

export interface PulledImage {
  /** The reference as the pod names it. */
  image: string;
  /** sha256:… of the manifest as pulled. */
  digest: string;
  /** `repo@sha256:…`, as a kubelet reports imageID. */
  imageID: string;
  config: ImageConfig;
  /** The unpacked root filesystem (shared by every container of the image: mount it read-only or under an overlay). */
  rootfs: string;
}

/** Credentials for one registry host, from a kubernetes.io/dockerconfigjson Secret. */
export interface RegistryCredential {
  username: string;
  password: string;
}

/** A pull that failed: `message` is what the container status shows (ErrImagePull/ImagePullBackOff). */
export class ImagePullError extends Error {}

export interface ImageStoreOptions {
  /** Registry host → directory with ca.crt for TLS registries. Hosts not listed are pulled with TLS verification off (http). */
  certDirs?: Record<string, string>;
  /** Pull timeout (default 120 s). */
  timeoutMs?: number;
}

/** Registry host of a reference (docker.io when the first part is not a host). */
export function registryHost(image: string): string {
  const first = image.split('/')[0]!;
  if (image.includes('/') && (first.includes('.') || first.includes(':') || first === 'localhost')) return first;
  return 'docker.io';
}

/** A registry host on loopback (127.0.0.0/8, localhost, [::1]), with or without a port. */
export function isLocalRegistry(host: string): boolean {
  const name = host.startsWith('[') ? host.slice(1, host.indexOf(']')) : host.replace(/:\d+$/, '');
  return name === 'localhost' || name === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(name);
}

function repository(image: string): string {
  const noDigest = image.split('@')[0]!;
  const slash = noDigest.lastIndexOf('/');
  const colon = noDigest.lastIndexOf(':');
  return colon > slash ? noDigest.slice(0, colon) : noDigest;
}

/** Whether an image should be pulled even when present (imagePullPolicy, with the API's default for :latest / no tag). */
export function alwaysPull(image: string, policy: string | undefined): boolean {
  if (policy === 'Always') return true;
  if (policy === 'IfNotPresent' || policy === 'Never') return false;
  if (image.includes('@')) return false;
  const slash = image.lastIndexOf('/');
  const colon = image.lastIndexOf(':');
  return colon <= slash || image.slice(colon + 1) === 'latest';
}

export class ImageStore {
  /** How long each pull took (skopeo copy, then unpacking; unpackMs is 0 when the rootfs was cached). */
  readonly timings: Array<{ image: string; pullMs: number; unpackMs: number }> = [];
  private readonly cached = new Map<string, PulledImage>();
  private readonly inflight = new Map<string, Promise<PulledImage>>();
  private readonly unpacking = new Map<string, Promise<void>>();

  constructor(
    readonly dir: string,
    private readonly options: ImageStoreOptions = {},
  ) {}

  /** The image if it was pulled before (imagePullPolicy IfNotPresent/Never). */
  present(image: string): PulledImage | undefined {
    return this.cached.get(image);
  }

  /** Pulls (and unpacks) an image; concurrent pulls of one reference with the same credentials share the work. */
  pull(image: string, credentials: RegistryCredential[]): Promise<PulledImage> {
    const key = `${image}\0${JSON.stringify(credentials)}`;
    let p = this.inflight.get(key);
    if (!p) {
      p = this.doPull(image, credentials).finally(() => this.inflight.delete(key));
      this.inflight.set(key, p);
    }
    return p;
  }

  private async doPull(image: string, credentials: RegistryCredential[]): Promise<PulledImage> {
    await mkdir(path.join(this.dir, 'rootfs'), { recursive: true });
    const layout = await mkdtemp(path.join(this.dir, 'pull-'));
    try {
      const host = registryHost(image);
      // The test node pulls only from registries on this machine: a name like fnr.test or ghcr.io would
      // send skopeo (and the system resolver) off the machine. Refused as a real node refuses an unknown host.
      if (!isLocalRegistry(host)) throw new ImagePullError(`failed to pull and unpack image "${image}": the test node pulls only from registries on loopback (${host} is not one)`);
      // A kubelet tries each matching credential in turn, then anonymously when there is none.
      const attempts: Array<RegistryCredential | undefined> = credentials.length > 0 ? credentials : [undefined];
      let lastError = '';
      let ok = false;
      const t0 = Date.now();
      for (const cred of attempts) {
        const args = ['copy', '--insecure-policy', '--quiet', '--retry-times', '0', '--override-os', 'linux', '--override-arch', 'amd64'];
        const certDir = this.options.certDirs?.[host];
        if (certDir) args.push('--src-cert-dir', certDir);
        else args.push('--src-tls-verify=false');
        if (cred) {
          const authFile = path.join(layout, '..', `${path.basename(layout)}.auth.json`);
          const auth = Buffer.from(`${cred.username}:${cred.password}`).toString('base64');
          await writeFile(authFile, JSON.stringify({ auths: { [host]: { auth } } }), { mode: 0o600 });
          args.push('--src-authfile', authFile);
        } else {
          args.push('--src-no-creds');
        }
        args.push(`docker://${image}`, `oci:${layout}:img`);
        const r = await run('skopeo', args, { timeoutMs: this.options.timeoutMs ?? 120_000 });
        await rm(path.join(layout, '..', `${path.basename(layout)}.auth.json`), { force: true });
        if (r.code === 0) {
          ok = true;
          break;
        }
        lastError = (r.stderr.trim().split('\n').pop() ?? '').replace(/^time="[^"]*" level=\w+ msg="?/, '').replace(/"$/, '');
      }
      if (!ok) throw new ImagePullError(`failed to pull and unpack image "${image}": ${lastError || 'skopeo failed'}`);
      const index = JSON.parse(await readFile(path.join(layout, 'index.json'), 'utf8')) as { manifests: Array<{ digest: string }> };
      const digest = index.manifests[0]!.digest;
      const blob = (d: string): string => path.join(layout, 'blobs', ...d.split(':'));
      const manifest = JSON.parse(await readFile(blob(digest), 'utf8')) as { config: { digest: string }; layers: Array<{ digest: string; mediaType: string }> };
      const configDoc = JSON.parse(await readFile(blob(manifest.config.digest), 'utf8')) as { config?: ImageConfig };
      const rootfs = path.join(this.dir, 'rootfs', digest.replace(':', '-'));
      const t1 = Date.now();
      await this.unpackOnce(rootfs, manifest.layers.map((l) => ({ file: blob(l.digest), mediaType: l.mediaType })));
      const pulled: PulledImage = { image, digest, imageID: `${repository(image)}@${digest}`, config: configDoc.config ?? {}, rootfs };
      this.cached.set(image, pulled);
      this.timings.push({ image, pullMs: t1 - t0, unpackMs: Date.now() - t1 });
      return pulled;
    } finally {
      await rm(layout, { recursive: true, force: true });
    }
  }

  private async unpackOnce(rootfs: string, layers: Array<{ file: string; mediaType: string }>): Promise<void> {
    if (existsSync(rootfs)) return;
    let p = this.unpacking.get(rootfs);
    if (!p) {
      p = (async () => {
        const tmp = `${rootfs}.tmp-${process.pid}-${createHash('sha256').update(String(Math.random())).digest('hex').slice(0, 8)}`;
        await mkdir(tmp, { recursive: true });
        try {
          for (const layer of layers) await unpackLayer(tmp, layer.file, layer.mediaType);
          await rename(tmp, rootfs);
        } catch (e) {
          await rm(tmp, { recursive: true, force: true });
          throw e;
        }
      })().finally(() => this.unpacking.delete(rootfs));
      this.unpacking.set(rootfs, p);
    }
    return p;
  }

  /** Removes every unpacked image. */
  async clear(): Promise<void> {
    this.cached.clear();
    await rm(this.dir, { recursive: true, force: true });
  }
}

/** A path inside root that never leaves it through `..` or a symlinked parent; undefined when it would. */
async function safeJoin(root: string, name: string): Promise<string | undefined> {
  const parts = name.split('/').filter((p) => p !== '' && p !== '.');
  if (parts.some((p) => p === '..')) return undefined;
  let current = root;
  for (const part of parts.slice(0, -1)) {
    current = path.join(current, part);
    const st = await lstat(current).catch(() => undefined);
    if (!st) return path.join(root, ...parts); // a missing parent: nothing below it to delete either
    if (st.isSymbolicLink()) return undefined;
  }
  return path.join(root, ...parts);
}

/** Extracts one layer into rootfs: whiteouts of this layer first (they refer to lower layers), then its files. */
export async function unpackLayer(rootfs: string, file: string, mediaType: string): Promise<void> {
  if (/zstd/.test(mediaType)) throw new ImagePullError(`layer media type ${mediaType} is not supported by the test node (gzip or uncompressed only)`);
  // Whiteouts only delete from lower layers: with nothing below (the first non-empty layer), skip the listing pass.
  const lower = (await readdir(rootfs)).length > 0;
  const listing = lower ? await must('tar', ['-t', '--quoting-style=literal', '-f', file], { timeoutMs: 120_000 }) : '';
  const entries = listing.split('\n').filter((l) => l !== '');
  for (const entry of entries) {
    const clean = entry.replace(/\/+$/, '');
    const base = path.posix.basename(clean);
    const dir = path.posix.dirname(clean);
    if (base === '.wh..wh..opq') {
      const target = await safeJoin(rootfs, dir === '.' ? '' : dir);
      if (!target) continue;
      for (const child of await readdir(target).catch(() => [] as string[])) await rm(path.join(target, child), { recursive: true, force: true });
    } else if (base.startsWith('.wh.')) {
      const target = await safeJoin(rootfs, path.posix.join(dir, base.slice('.wh.'.length)));
      if (target && target !== rootfs) await rm(target, { recursive: true, force: true });
    }
  }
  await must('tar', ['-x', '-f', file, '-C', rootfs, '--numeric-owner', '--same-owner', '-p', '--exclude=.wh.*', '--exclude=*/.wh.*', '--no-overwrite-dir'], { timeoutMs: 300_000 });
}
