/**
 * From a core/v1 container (plus its pod and its image's config) to an OCI runtime config for runc:
 * the process (command/args after Docker's ENTRYPOINT/CMD rules, env, working dir, user, capabilities,
 * noNewPrivileges), the root filesystem (read-only when asked), the pod's network namespace and its mounts.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';

import type { ImageConfig } from './images.js';

type KubeObject = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** A container configuration the node refuses (CreateContainerConfigError). */
export class ContainerConfigError extends Error {}
/** A container the runtime cannot create (CreateContainerError). */
export class ContainerCreateError extends Error {}

export const DEFAULT_PATH = 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** The capabilities a container gets by default (containerd's default set). */
export const DEFAULT_CAPABILITIES = [
  'CAP_CHOWN', 'CAP_DAC_OVERRIDE', 'CAP_FSETID', 'CAP_FOWNER', 'CAP_MKNOD', 'CAP_NET_RAW', 'CAP_SETGID', 'CAP_SETUID',
  'CAP_SETFCAP', 'CAP_SETPCAP', 'CAP_NET_BIND_SERVICE', 'CAP_SYS_CHROOT', 'CAP_KILL', 'CAP_AUDIT_WRITE',
];

/** `$(VAR)` expansion as the kubelet does it (`$$` is a literal `$`; unknown references stay as written). */
export function expandVars(text: string, env: Record<string, string | undefined>): string {
  return text.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (match, name: string | undefined) => {
    if (match === '$$') return '$';
    const value = env[name!];
    return value === undefined ? match : value;
  });
}

/** argv from Docker's rules: command replaces ENTRYPOINT (and drops CMD), args replace CMD. */
export function containerArgv(container: KubeObject, image: ImageConfig, env: Record<string, string>): string[] {
  const hasCommand = Array.isArray(container.command) && container.command.length > 0;
  const command: string[] = hasCommand ? container.command.map(String) : (image.Entrypoint ?? []);
  const args: string[] = Array.isArray(container.args) && container.args.length > 0 ? container.args.map(String) : hasCommand ? [] : (image.Cmd ?? []);
  const argv = [...command, ...args].map((t) => expandVars(t, env));
  if (argv.length === 0) throw new ContainerCreateError('failed to generate container spec: no command specified');
  return argv;
}

function lookupName(rootfs: string, file: 'passwd' | 'group', name: string): string[] | undefined {
  let text: string;
  try {
    text = readFileSync(path.join(rootfs, 'etc', file), 'utf8');
  } catch {
    return undefined;
  }
  for (const line of text.split('\n')) {
    const fields = line.split(':');
    if (fields[0] === name) return fields;
  }
  return undefined;
}

/** uid/gid of the image's USER (`uid`, `uid:gid`, `name`, `name:group`), resolved against the rootfs's /etc files. */
export function imageUser(user: string | undefined, rootfs: string): { uid: number; gid: number | undefined } {
  if (!user) return { uid: 0, gid: undefined };
  const [u, g] = user.split(':') as [string, string | undefined];
  let uid: number;
  let gid: number | undefined;
  if (/^\d+$/.test(u)) {
    uid = Number(u);
    const byUid = (() => {
      try {
        return readFileSync(path.join(rootfs, 'etc', 'passwd'), 'utf8').split('\n').map((l) => l.split(':')).find((f) => f[2] === u);
      } catch {
        return undefined;
      }
    })();
    if (byUid) gid = Number(byUid[3]);
  } else {
    const entry = lookupName(rootfs, 'passwd', u);
    if (!entry) throw new ContainerCreateError(`unable to find user ${u}: no matching entries in passwd file`);
    uid = Number(entry[2]);
    gid = Number(entry[3]);
  }
  if (g !== undefined && g !== '') {
    if (/^\d+$/.test(g)) gid = Number(g);
    else {
      const entry = lookupName(rootfs, 'group', g);
      if (!entry) throw new ContainerCreateError(`unable to find group ${g}: no matching entries in group file`);
      gid = Number(entry[2]);
    }
  }
  return { uid, gid };
}

export interface ProcessUser {
  uid: number;
  gid: number;
  additionalGids: number[];
}

/** The process user from the pod's and the container's securityContext over the image's USER (runAsNonRoot checked). */
export function resolveUser(pod: KubeObject, container: KubeObject, image: ImageConfig, rootfs: string): ProcessUser {
  const psc: KubeObject = pod.spec?.securityContext ?? {};
  const csc: KubeObject = container.securityContext ?? {};
  const fromImage = imageUser(image.User, rootfs);
  const runAsUser = csc.runAsUser ?? psc.runAsUser;
  const runAsGroup = csc.runAsGroup ?? psc.runAsGroup;
  const uid = runAsUser !== undefined ? Number(runAsUser) : fromImage.uid;
  const gid = runAsGroup !== undefined ? Number(runAsGroup) : (fromImage.gid ?? 0);
  const nonRoot = csc.runAsNonRoot ?? psc.runAsNonRoot;
  if (nonRoot === true && uid === 0) {
    if (runAsUser !== undefined) throw new ContainerConfigError("container's runAsUser breaks non-root policy");
    if (image.User && !/^\d+(:|$)/.test(image.User)) throw new ContainerConfigError(`container has runAsNonRoot and image has non-numeric user (${image.User}), cannot verify user is non-root`);
    throw new ContainerConfigError('container has runAsNonRoot and image will run as root');
  }
  const additionalGids = new Set<number>();
  if (psc.fsGroup !== undefined) additionalGids.add(Number(psc.fsGroup));
  for (const g of (psc.supplementalGroups ?? []) as number[]) additionalGids.add(Number(g));
  return { uid, gid, additionalGids: [...additionalGids] };
}

/** The capability set from securityContext.capabilities over the default set (`ALL` in drop empties it). */
export function resolveCapabilities(container: KubeObject): string[] {
  const caps = container.securityContext?.capabilities ?? {};
  const norm = (c: string): string => (c.toUpperCase().startsWith('CAP_') ? c.toUpperCase() : `CAP_${c.toUpperCase()}`);
  const drop = new Set(((caps.drop ?? []) as string[]).map(norm));
  let set = drop.has('CAP_ALL') ? [] : DEFAULT_CAPABILITIES.filter((c) => !drop.has(c));
  for (const add of (caps.add ?? []) as string[]) if (!set.includes(norm(add))) set = [...set, norm(add)];
  return set;
}

export interface Mount {
  destination: string;
  source: string;
  readOnly?: boolean;
}

/** A Kubernetes quantity as a number (bytes for memory, cores for cpu); throws ContainerConfigError when malformed. */
export function parseQuantity(q: unknown): number {
  const m = /^([+-]?\d+(?:\.\d+)?)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$/.exec(String(q).trim());
  if (!m) throw new ContainerConfigError(`invalid quantity ${JSON.stringify(q)}`);
  const factor: Record<string, number> = { m: 1e-3, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60 };
  return Number(m[1]) * (m[2] ? factor[m[2]]! : 1);
}

export interface ContainerResources {
  memoryLimitBytes?: number;
  /** CFS quota for a period of 100 ms (limits.cpu). */
  cpuQuota?: number;
  /** cpu.shares (not set from requests: see resolveResources). */
  cpuShares?: number;
}

/** cgroup settings from the container's limits (requests are checked, not applied: see below and docs/node.md). */
export function resolveResources(container: KubeObject): ContainerResources {
  const limits: KubeObject = container.resources?.limits ?? {};
  const requests: KubeObject = container.resources?.requests ?? {};
  const out: ContainerResources = {};
  if (limits.memory !== undefined) out.memoryLimitBytes = Math.round(parseQuantity(limits.memory));
  if (limits.cpu !== undefined) out.cpuQuota = Math.max(1000, Math.round(parseQuantity(limits.cpu) * 100_000));
  // requests.cpu would be cpu.shares, but without a kubepods parent cgroup the shares would weigh a pod against
  // every process of the machine (100m = 102 vs 1024): a busy shared test machine would starve it. Checked, not applied.
  if (requests.cpu !== undefined) parseQuantity(requests.cpu);
  if (requests.memory !== undefined) parseQuantity(requests.memory);
  return out;
}

export interface RuntimeSpecInput {
  argv: string[];
  env: string[];
  cwd: string;
  user: ProcessUser;
  capabilities: string[];
  noNewPrivileges: boolean;
  readonlyRootfs: boolean;
  hostname: string;
  netnsPath: string;
  mounts: Mount[];
  resources?: ContainerResources;
  /** Relative to the node process's own cgroups (so containers count against it). */
  cgroupsPath?: string;
}

/** The OCI runtime config (config.json) for a bundle whose root filesystem is `rootfs/` next to it. */
export function runtimeSpec(input: RuntimeSpecInput): KubeObject {
  const caps = input.capabilities;
  return {
    ociVersion: '1.0.2',
    process: {
      terminal: false,
      user: { uid: input.user.uid, gid: input.user.gid, additionalGids: input.user.additionalGids },
      args: input.argv,
      env: input.env,
      cwd: input.cwd,
      capabilities: { bounding: caps, effective: caps, permitted: caps },
      noNewPrivileges: input.noNewPrivileges,
    },
    root: { path: 'rootfs', readonly: input.readonlyRootfs },
    hostname: input.hostname,
    mounts: [
      { destination: '/proc', type: 'proc', source: 'proc' },
      { destination: '/dev', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'strictatime', 'mode=755', 'size=65536k'] },
      { destination: '/dev/pts', type: 'devpts', source: 'devpts', options: ['nosuid', 'noexec', 'newinstance', 'ptmxmode=0666', 'mode=0620', 'gid=5'] },
      { destination: '/dev/shm', type: 'tmpfs', source: 'shm', options: ['nosuid', 'noexec', 'nodev', 'mode=1777', 'size=65536k'] },
      { destination: '/dev/mqueue', type: 'mqueue', source: 'mqueue', options: ['nosuid', 'noexec', 'nodev'] },
      { destination: '/sys', type: 'sysfs', source: 'sysfs', options: ['nosuid', 'noexec', 'nodev', 'ro'] },
      { destination: '/sys/fs/cgroup', type: 'cgroup', source: 'cgroup', options: ['nosuid', 'noexec', 'nodev', 'relatime', 'ro'] },
      ...input.mounts.map((m) => ({ destination: m.destination, type: 'bind', source: m.source, options: ['rbind', 'rprivate', m.readOnly ? 'ro' : 'rw'] })),
    ],
    linux: {
      ...(input.cgroupsPath ? { cgroupsPath: input.cgroupsPath } : {}),
      resources: {
        ...(input.resources?.memoryLimitBytes !== undefined ? { memory: { limit: input.resources.memoryLimitBytes } } : {}),
        ...(input.resources?.cpuQuota !== undefined || input.resources?.cpuShares !== undefined
          ? { cpu: { ...(input.resources.cpuQuota !== undefined ? { quota: input.resources.cpuQuota, period: 100_000 } : {}), ...(input.resources.cpuShares !== undefined ? { shares: input.resources.cpuShares } : {}) } }
          : {}),
      },
      namespaces: [{ type: 'pid' }, { type: 'ipc' }, { type: 'uts' }, { type: 'mount' }, { type: 'network', path: input.netnsPath }],
      maskedPaths: ['/proc/acpi', '/proc/asound', '/proc/kcore', '/proc/keys', '/proc/latency_stats', '/proc/timer_list', '/proc/timer_stats', '/proc/sched_debug', '/sys/firmware', '/proc/scsi'],
      readonlyPaths: ['/proc/bus', '/proc/fs', '/proc/irq', '/proc/sys', '/proc/sysrq-trigger'],
    },
  };
}
