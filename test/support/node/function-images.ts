/**
 * The two images a function pod of fnr's inline template needs on the runc node, pushed to a test registry: the
 * wrapper-server image (./fixtures.ts pushWrapperServerImage) and a function image whose entrypoint is a shell
 * script that logs its uid/gid and echoes the ResourceList (`cat`). Used by test/node/function-pods.test.ts
 * and test/cluster/function-pods.test.ts.
 */
import type { TestRegistry } from '../registry/registry.js';
import { pushScriptFunctionImage, pushWrapperServerImage } from './fixtures.js';

/** The function: logs who it runs as, then copies stdin (the ResourceList) to stdout. */
export const CAT_FUNCTION_SCRIPT = '#!/bin/sh\necho "fn ran as uid=$(/bin/busybox id -u) gid=$(/bin/busybox id -g)" >&2\nexec /bin/busybox cat\n';

export interface FunctionPodImages {
  wrapperImage: string;
  fnImage: string;
  /** How long building and pushing both took. */
  ms: number;
}

/** Pushes `fnr/wrapper-server:v1` and `fn/busybox-cat:v1` (the cat function) to `registry`. */
export async function pushFunctionPodImages(registry: TestRegistry, authFile?: string): Promise<FunctionPodImages> {
  const t = Date.now();
  await pushWrapperServerImage(registry, 'fnr/wrapper-server:v1', authFile);
  await pushScriptFunctionImage(registry, 'fn/busybox-cat:v1', CAT_FUNCTION_SCRIPT, authFile);
  return { wrapperImage: `${registry.host}/fnr/wrapper-server:v1`, fnImage: `${registry.host}/fn/busybox-cat:v1`, ms: Date.now() - t };
}
