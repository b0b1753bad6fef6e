/**
 * Images for function pods on the runc node, built by hand (no Docker) and pushed with skopeo:
 *   - the wrapper-server image, laid out as docker/wrapper-server.Dockerfile makes it: the packaged folder
 *     (npm run package:wrapper) at /wrapper-server, /home/nonroot/wrapper-server -> /wrapper-server, a static
 *     busybox with sh/cp/ls/cat, USER 65532:65532, CMD cp -a /wrapper-server/. /wrapper-server-tools;
 *   - a function image: a static busybox and a #!/bin/sh script at /usr/local/bin/function (no Node, no libc).
 */
import { chmod, copyFile, mkdir, mkdtemp, rm, symlink } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { readFileSync } from 'node:fs';

import { pushImage } from '../registry/fixtures.js';
import type { TestRegistry } from '../registry/registry.js';
import { copyFolder, packagedFolder } from '../../wrapper/support/package.js';
import { must } from './runc.js';
import { findStaticBusybox } from './runc.js';

/** Builds build/wrapper-server if needed and pushes the wrapper-server image as `repoTag`. */
export async function pushWrapperServerImage(registry: TestRegistry, repoTag: string, authFile?: string): Promise<void> {
  const folder = await packagedFolder();
  const staging = await mkdtemp(path.join(os.tmpdir(), 'fnr-wrapper-image-'));
  try {
    await mkdir(path.join(staging, 'wrapper-server'));
    copyFolder(folder, path.join(staging, 'wrapper-server'));
    await mkdir(path.join(staging, 'bin'));
    await copyFile(findStaticBusybox()!, path.join(staging, 'bin', 'busybox'));
    await chmod(path.join(staging, 'bin', 'busybox'), 0o755);
    for (const applet of ['sh', 'cp', 'ls', 'cat']) await symlink('busybox', path.join(staging, 'bin', applet));
    await mkdir(path.join(staging, 'home', 'nonroot'), { recursive: true });
    await symlink('/wrapper-server', path.join(staging, 'home', 'nonroot', 'wrapper-server'));
    const layer = path.join(os.tmpdir(), `${path.basename(staging)}.tar`);
    await must('tar', ['-C', staging, '--numeric-owner', '--owner=0', '--group=0', '-cf', layer, '.']);
    try {
      await pushImage(
        registry,
        repoTag,
        { files: {}, layers: [readFileSync(layer)], user: '65532:65532', cmd: ['cp', '-a', '/wrapper-server/.', '/wrapper-server-tools'], env: ['PATH=/bin'], gzipLevel: 1 },
        authFile,
      );
    } finally {
      await rm(layer, { force: true });
    }
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

/** Pushes a function image whose entrypoint is `script` (run by a static busybox sh). */
export async function pushScriptFunctionImage(registry: TestRegistry, repoTag: string, script: string, authFile?: string): Promise<void> {
  const busybox = readFileSync(findStaticBusybox()!);
  await pushImage(
    registry,
    repoTag,
    { entrypoint: ['/usr/local/bin/function'], env: ['PATH=/bin'], files: { 'bin/busybox': busybox, 'bin/sh': busybox, 'usr/local/bin/function': script } },
    authFile,
  );
}

/** Pushes a plain busybox image: Entrypoint ["/bin/sh", "-c"], a passwd with nonroot (65532). */
export async function pushBusyboxImage(registry: TestRegistry, repoTag: string, authFile?: string): Promise<void> {
  const busybox = readFileSync(findStaticBusybox()!);
  await pushImage(
    registry,
    repoTag,
    {
      entrypoint: ['/bin/sh', '-c'],
      env: ['PATH=/bin'],
      files: { 'bin/busybox': busybox, 'bin/sh': busybox, 'etc/passwd': 'root:x:0:0:root:/root:/bin/sh\nnonroot:x:65532:65532:nonroot:/home/nonroot:/bin/sh\n' },
    },
    authFile,
  );
}
