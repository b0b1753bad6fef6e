/**
 * Pod networks: one network namespace per pod (`ip netns add fnrp-…`), joined to the host by a veth pair whose
 * host end (`fnrv…`) gets .1 and whose pod end (`eth0` in the namespace) gets .2 of a /30 taken from
 * 198.18.0.0/15, the range RFC 2544 sets aside for benchmark testing (not a private range any real network here
 * uses). The host reaches the pod at .2 directly (a connected route): no forwarding, no NAT, no other interface is
 * touched. A /30 in use by any interface on the host is skipped, so several test processes can share the machine.
 * remove() deletes the namespace and the host end of the veth.
 */
import { spawnSync } from 'node:child_process';
import { randomInt } from 'node:crypto';

import { must, run } from './runc.js';

export interface PodNetwork {
  /** Namespace name (its path is /var/run/netns/<name>). */
  netns: string;
  nsPath: string;
  hostIf: string;
  hostIP: string;
  podIP: string;
}

const BASE = (198 << 24) | (18 << 16); // 198.18.0.0/15: 32768 /30 blocks
const BLOCKS = 1 << 15;
/**
 * Namespaces created and not yet removed, kept on globalThis: mocha loads a spec file with require() and, when that
 * fails (an ESM-only dependency), with import(), so one process can hold two instances of this module (one per module
 * system), and the shared control plane's node may be another instance's than the spec's that asks.
 */
const CREATED = Symbol.for('fnr.test.podNetworks');
const created: Set<string> = ((globalThis as typeof globalThis & { [CREATED]?: Set<string> })[CREATED] ??= new Set<string>());
let exitHook = false;

function ipOf(n: number): string {
  return [(n >>> 24) & 255, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
}

async function usedBlocks(): Promise<Set<number>> {
  const r = await run('ip', ['-o', '-4', 'addr', 'show']);
  const used = new Set<number>();
  for (const m of r.stdout.matchAll(/inet (198\.1[89])\.(\d+)\.(\d+)\//g)) {
    const n = (198 << 24) | (Number(m[1]!.slice(4)) << 16) | (Number(m[2]) << 8) | Number(m[3]);
    used.add(((n - BASE) >>> 2) & (BLOCKS - 1));
  }
  return used;
}

/** Creates a pod's namespace and veth; retries another /30 if a concurrent process took the one picked. */
export async function createPodNetwork(): Promise<PodNetwork> {
  if (!exitHook) {
    exitHook = true;
    process.on('exit', () => {
      // Last resort when after() hooks did not run: namespaces take their veths with them.
      for (const ns of created) spawnSync('ip', ['netns', 'del', ns]);
    });
  }
  let lastError: unknown;
  for (let attempt = 0; attempt < 5; attempt++) {
    const used = await usedBlocks();
    let block = randomInt(BLOCKS);
    while (used.has(block)) block = (block + 1) % BLOCKS;
    const id = `${process.pid.toString(36)}${randomInt(36 ** 4).toString(36).padStart(4, '0')}`.slice(-9);
    const netns = `fnrp-${id}`;
    const hostIf = `fnrv${id}`;
    const hostIP = ipOf(BASE + block * 4 + 1);
    const podIP = ipOf(BASE + block * 4 + 2);
    try {
      await must('ip', ['netns', 'add', netns]);
      created.add(netns);
      await must('ip', ['link', 'add', hostIf, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', netns]);
      await must('ip', ['addr', 'add', `${hostIP}/30`, 'dev', hostIf]);
      await must('ip', ['link', 'set', hostIf, 'up']);
      await must('ip', ['-n', netns, 'addr', 'add', `${podIP}/30`, 'dev', 'eth0']);
      await must('ip', ['-n', netns, 'link', 'set', 'eth0', 'up']);
      await must('ip', ['-n', netns, 'link', 'set', 'lo', 'up']);
      await must('ip', ['-n', netns, 'route', 'add', 'default', 'via', hostIP]);
      return { netns, nsPath: `/var/run/netns/${netns}`, hostIf, hostIP, podIP };
    } catch (e) {
      lastError = e;
      await removePodNetwork({ netns, hostIf });
    }
  }
  throw lastError;
}

export async function removePodNetwork(net: Pick<PodNetwork, 'netns' | 'hostIf'>): Promise<void> {
  await run('ip', ['link', 'del', net.hostIf]);
  await run('ip', ['netns', 'del', net.netns]);
  created.delete(net.netns);
}

/** Namespaces this process created and has not removed (tests assert it is empty after cleanup). */
export function liveNetworks(): string[] {
  return [...created];
}

/** The live pod network whose pod end holds `podIP` (a test finds its pod's namespace by the pod's address). */
export async function networkWithAddress(podIP: string): Promise<string | undefined> {
  for (const netns of liveNetworks()) {
    const { stdout } = await run('ip', ['-n', netns, '-4', '-o', 'addr', 'show', 'dev', 'eth0']);
    if (stdout.includes(` ${podIP}/`)) return netns;
  }
  return undefined;
}
