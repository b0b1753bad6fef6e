/**
 * Function pod start on the runc test node (docs/node.md), without an API server: fnr's inline template with the
 * wrapper-server image and a busybox function image from docker-registry, from start to Ready (grpc probe), split
 * into a cold start (both images pulled and unpacked) and warm starts (images cached: sandbox + init copy + runc +
 * wrapper start + first successful probe). Needs root, runc, skopeo, docker-registry (as the tests).
 *
 *   node --import tsx bench/node-pod-start.ts            # FNR_BENCH_NODE_STARTS=N warm starts (default 5)
 *
 * Prints numbers only; nothing is asserted.
 */
import type { V1Pod } from '@kubernetes/client-node';

import { inlinePodTemplate } from '../src/lib/pods/model/template.js';
import { wrapperServerArgs } from '../src/lib/registry/image-config.js';
import { pushScriptFunctionImage, pushWrapperServerImage } from '../test/support/node/fixtures.js';
import { type NodePod, RuncRuntime } from '../test/support/node/index.js';
import { TestRegistry } from '../test/support/registry/registry.js';

type KubeObject = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

function functionPod(wrapperImage: string, fnImage: string, n: number): KubeObject {
  const pod = inlinePodTemplate({ wrapperServerImage: wrapperImage }) as V1Pod & KubeObject;
  pod.metadata = { ...pod.metadata, name: `bench-${n}`, namespace: 'bench', uid: `bench-${process.pid}-${n}` };
  const fn = pod.spec!.containers.find((c) => c.name === 'function')!;
  fn.image = fnImage;
  fn.args = [...(fn.args ?? []), ...wrapperServerArgs(['/usr/local/bin/function'])];
  return pod;
}

async function startToReady(node: RuncRuntime, pod: KubeObject): Promise<{ ms: number; pod: NodePod }> {
  const t = Date.now();
  let ready = false;
  const np = node.startPod(pod, {
    read: async () => undefined,
    writeStatus: async (s) => {
      if (s.conditions?.some((c: KubeObject) => c.type === 'Ready' && c.status === 'True')) ready = true;
    },
  });
  const deadline = Date.now() + 120_000;
  while (!ready) {
    if (Date.now() > deadline) throw new Error(`pod ${pod.metadata.name} not ready within 120 s`);
    await new Promise((r) => setTimeout(r, 10));
  }
  return { ms: Date.now() - t, pod: np };
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const warmStarts = Number(process.env.FNR_BENCH_NODE_STARTS ?? 5);
  const registry = await TestRegistry.start({ mode: 'none' });
  const node = await RuncRuntime.create();
  try {
    const wrapperImage = `${registry.host}/fnr/wrapper-server:v1`;
    const fnImage = `${registry.host}/fn/busybox-cat:v1`;
    await pushWrapperServerImage(registry, 'fnr/wrapper-server:v1');
    await pushScriptFunctionImage(registry, 'fn/busybox-cat:v1', '#!/bin/sh\nexec /bin/busybox cat\n');
    const cold = await startToReady(node, functionPod(wrapperImage, fnImage, 0));
    await cold.pod.terminate(5);
    const warm: number[] = [];
    for (let i = 1; i <= warmStarts; i++) {
      const r = await startToReady(node, functionPod(wrapperImage, fnImage, i));
      warm.push(r.ms);
      await r.pod.terminate(5);
    }
    const load = (await import('node:os')).loadavg()[0]!.toFixed(1);
    console.log('| case | ms |');
    console.log('|---|---|');
    console.log(`| cold start to Ready (pull + unpack of both images included) | ${cold.ms} |`);
    for (const t of node.images.timings) console.log(`| - ${t.image.replace(/^[^/]+\//, '')}: skopeo pull / unpack | ${t.pullMs} / ${t.unpackMs} |`);
    console.log(`| warm start to Ready, median of ${warm.length} (min ${Math.min(...warm)}, max ${Math.max(...warm)}) | ${median(warm)} |`);
    console.log(`\nload average (1 min) at the end: ${load}`);
  } finally {
    await node.stop();
    await registry.stop();
  }
}

await main();
