/**
 * The fnr image without Docker: docker/fnr.Dockerfile's final stage read and laid out by hand from this checkout's
 * build, then pushed to a test registry, so the runc node can run `fnr serve` as a pod from manifests/deployment.yaml.
 *
 * What stands in for what:
 * - the base image (`node:26-bookworm-slim` plus tini and the `nonroot` user): the Node binary this process runs on,
 *   Debian's tini, the shared libraries both link (copied from the host at the paths `ldd` names), a static busybox
 *   as `/bin/sh` and `/usr/bin/env` (the Porch entry scripts and the shipped functions' `#!/usr/bin/env node`), and an
 *   /etc/passwd and /etc/group with `nonroot` (65532);
 * - the stage's `COPY --from=build /src/X`: X from this checkout (built: `npm run build`); for `node_modules`, the
 *   packages of a production install (package-lock.json), as the build stage's `npm ci --omit=dev` leaves them,
 *   without the files no process loads (TypeScript sources and declarations, source maps, Markdown: 56 of 143 MB);
 * - the layer is stored uncompressed (gzip level 0): the image is pushed and pulled once per test run, on the same
 *   machine;
 * - the stage's `RUN ln -s`, `ENV`, `WORKDIR`, `USER`, `ENTRYPOINT` and `CMD`: as written (`--chown` is left out:
 *   everything is root-owned and world-readable, which the deployment's read-only root filesystem needs anyway).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, realpathSync } from 'node:fs';
import { chmod, copyFile, cp, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

import { JEMALLOC_LIBRARY } from '../../../scripts/setup.mjs';
import { pushImage } from '../registry/fixtures.js';
import type { TestRegistry } from '../registry/registry.js';
import { REPO_ROOT } from '../serve.js';
import { findStaticBusybox, must } from './runc.js';

export interface DockerInstruction {
  op: string;
  args: string;
}

/** The final stage's instructions of a Dockerfile in docker/ (continuation lines joined, comments dropped). */
export async function dockerfileFinalStage(file: string): Promise<DockerInstruction[]> {
  const text = await readFile(path.join(REPO_ROOT, 'docker', file), 'utf8');
  const lines = text
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  let stage: DockerInstruction[] = [];
  for (const line of lines) {
    const [, op = '', args = ''] = /^(\S+)\s*(.*)$/.exec(line) ?? [];
    if (op.toUpperCase() === 'FROM') stage = [];
    else stage.push({ op: op.toUpperCase(), args });
  }
  return stage;
}

/** The stage's COPY instructions: `--from`, sources and destination. */
export function dockerfileCopies(stage: DockerInstruction[]): Array<{ from?: string; sources: string[]; dest: string }> {
  return stage
    .filter((i) => i.op === 'COPY')
    .map((i) => {
      const words = i.args.split(/\s+/);
      const paths = words.filter((w) => !w.startsWith('--'));
      return { from: words.find((w) => w.startsWith('--from='))?.slice(7), sources: paths.slice(0, -1), dest: paths.at(-1)! };
    });
}

/** Files of node_modules that no process loads: TypeScript sources and declarations, source maps, Markdown. */
const NOT_LOADED = /\.(?:d\.[cm]?ts|[cm]?ts|map|md)$/;

/**
 * The top-level folders of node_modules a production install has, from package-lock.json (what `npm ci
 * --omit=dev` installs: every package not marked `dev`); nested ones come with their parents.
 */
async function productionPackages(): Promise<string[]> {
  const lock = JSON.parse(await readFile(path.join(REPO_ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean }> };
  return Object.entries(lock.packages)
    .filter(([key, p]) => /^node_modules\/(?:@[^/]+\/)?[^/]+$/.test(key) && p.dev !== true)
    .map(([key]) => key.slice('node_modules/'.length))
    .sort();
}

const TINI = '/usr/bin/tini';

/** `ENV A=1 B=2` (or the legacy `ENV A 1`) as [name, value] pairs. */
export function envOf(args: string): Array<[string, string]> {
  if (!args.includes('=')) {
    const [name, ...rest] = args.split(/\s+/);
    return [[name!, rest.join(' ')]];
  }
  return args
    .split(/\s+/)
    .filter((w) => w.includes('='))
    .map((w) => [w.slice(0, w.indexOf('=')), w.slice(w.indexOf('=') + 1)]);
}

/**
 * The allocator settings of the fnr image (its final stage's `ENV LD_PRELOAD=… MALLOC_CONF=…`), for a
 * `fnr serve` started on this machine that must use memory as the image does: the suites that judge
 * memory and the benchmarks. Fails with one line when the preloaded library is missing here (the
 * loader would only warn and run on glibc's allocator).
 */
export async function imageAllocatorEnv(): Promise<Record<string, string>> {
  const env: Record<string, string> = {};
  for (const i of await dockerfileFinalStage('fnr.Dockerfile')) {
    if (i.op !== 'ENV') continue;
    for (const [name, value] of envOf(i.args)) if (name === 'LD_PRELOAD' || name.startsWith('MALLOC_')) env[name] = value;
  }
  if (env.LD_PRELOAD !== undefined && !existsSync(JEMALLOC_LIBRARY)) {
    throw new Error(`docker/fnr.Dockerfile preloads ${env.LD_PRELOAD}, not installed here (${JEMALLOC_LIBRARY}; Debian package libjemalloc2, which npm test installs)`);
  }
  return env;
}

/** Copies a binary and every library `ldd` says it loads to the same paths under `root`. */
async function copyWithLibraries(root: string, binary: string, dest: string): Promise<void> {
  await mkdir(path.dirname(path.join(root, dest)), { recursive: true });
  await copyFile(realpathSync(binary), path.join(root, dest));
  await chmod(path.join(root, dest), 0o755);
  const ldd = execFileSync('ldd', [realpathSync(binary)], { encoding: 'utf8' });
  for (const m of ldd.matchAll(/(?:=>\s*)?(\/\S+)\s+\(0x/g)) {
    const lib = m[1]!;
    const target = path.join(root, lib);
    await mkdir(path.dirname(target), { recursive: true });
    await copyFile(realpathSync(lib), target);
  }
}

/**
 * Lays out the fnr image (docker/fnr.Dockerfile's final stage) from this checkout and pushes it as `repoTag`.
 * Needs a build (dist/) and Debian's tini.
 */
export async function pushFnrImage(registry: TestRegistry, repoTag: string): Promise<{ image: string; ms: number; layerBytes: number }> {
  const t0 = Date.now();
  const stage = await dockerfileFinalStage('fnr.Dockerfile');
  const root = await mkdtemp(path.join(os.tmpdir(), 'fnr-image-'));
  const layer = `${root}.tar`;
  try {
    await chmod(root, 0o755);
    // the base image's part
    await copyWithLibraries(root, process.execPath, 'usr/local/bin/node');
    await copyWithLibraries(root, TINI, TINI.slice(1));
    await copyWithLibraries(root, JEMALLOC_LIBRARY, JEMALLOC_LIBRARY.slice(1));
    await mkdir(path.join(root, 'bin'), { recursive: true });
    await copyFile(findStaticBusybox()!, path.join(root, 'bin', 'busybox'));
    await chmod(path.join(root, 'bin', 'busybox'), 0o755);
    await symlink('busybox', path.join(root, 'bin', 'sh'));
    await mkdir(path.join(root, 'usr', 'bin'), { recursive: true });
    await symlink('/bin/busybox', path.join(root, 'usr', 'bin', 'env'));
    await mkdir(path.join(root, 'etc'), { recursive: true });
    await writeFile(path.join(root, 'etc', 'passwd'), 'root:x:0:0:root:/root:/bin/sh\nnonroot:x:65532:65532::/home/nonroot:/usr/sbin/nologin\n');
    await writeFile(path.join(root, 'etc', 'group'), 'root:x:0:\nnonroot:x:65532:\n');
    for (const d of ['tmp', 'home/nonroot', 'proc', 'dev', 'sys']) await mkdir(path.join(root, d), { recursive: true });
    await chmod(path.join(root, 'tmp'), 0o1777);

    // the stage as written
    let workdir = '/';
    const env: string[] = ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'];
    let user: string | undefined;
    let entrypoint: string[] | undefined;
    let cmd: string[] | undefined;
    for (const i of stage) {
      if (i.op === 'WORKDIR') workdir = path.posix.resolve(workdir, i.args);
      else if (i.op === 'ENV') env.push(...envOf(i.args).map(([name, value]) => `${name}=${value}`));
      else if (i.op === 'USER') user = i.args;
      else if (i.op === 'ENTRYPOINT') entrypoint = JSON.parse(i.args) as string[];
      else if (i.op === 'CMD') cmd = JSON.parse(i.args) as string[];
      else if (i.op === 'COPY') {
        const [c] = dockerfileCopies([i]);
        if (c!.from !== 'build') throw new Error(`docker/fnr.Dockerfile: COPY ${i.args}: only --from=build is laid out here`);
        for (const source of c!.sources) {
          const rel = path.posix.relative('/src', source);
          const dest = c!.dest.endsWith('/') || c!.sources.length > 1 ? path.posix.join(c!.dest, path.posix.basename(source)) : c!.dest;
          const target = path.join(root, path.posix.resolve(workdir, dest));
          await mkdir(path.dirname(target), { recursive: true });
          if (rel === 'node_modules') {
            for (const pkg of await productionPackages()) {
              await cp(path.join(REPO_ROOT, 'node_modules', pkg), path.join(target, pkg), { recursive: true, verbatimSymlinks: true, filter: (src) => !NOT_LOADED.test(src) });
            }
          } else {
            await cp(path.join(REPO_ROOT, rel), target, { recursive: true, verbatimSymlinks: true });
          }
        }
      } else if (i.op === 'RUN') {
        const link = /^ln -s (\S+) (\S+)$/.exec(i.args);
        if (!link) continue; // the base image's package installs: laid out above
        await mkdir(path.dirname(path.join(root, link[2]!)), { recursive: true });
        await symlink(link[1]!, path.join(root, link[2]!));
      }
    }
    if (!entrypoint) throw new Error('docker/fnr.Dockerfile: no ENTRYPOINT in the final stage');
    await must('tar', ['-C', root, '--numeric-owner', '--owner=0', '--group=0', '-cf', layer, '.']);
    const tar = await readFile(layer);
    await pushImage(registry, repoTag, { layers: [tar], entrypoint, cmd, env, user, workingDir: workdir, gzipLevel: 0 });
    return { image: `${registry.host}/${repoTag}`, ms: Date.now() - t0, layerBytes: tar.length };
  } finally {
    await rm(root, { recursive: true, force: true });
    await rm(layer, { force: true });
  }
}
