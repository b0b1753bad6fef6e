/**
 * runc and the host tools the node runtime needs (shared with test/wrapper/support/runc.ts).
 * Everything here runs as root on x86-64 Linux; runcUnavailableReason() says why not otherwise.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

export const BUSYBOX_CANDIDATES = ['/bin/busybox', '/usr/bin/busybox'];

export function findRunc(): string | undefined {
  for (const p of ['/usr/sbin/runc', '/usr/bin/runc', '/sbin/runc', '/bin/runc']) if (existsSync(p)) return p;
  const r = spawnSync('sh', ['-c', 'command -v runc'], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : undefined;
}

/** A static busybox (Debian busybox-static), or undefined. */
export function findStaticBusybox(): string | undefined {
  for (const p of BUSYBOX_CANDIDATES) {
    if (!existsSync(p)) continue;
    // ldd says "not a dynamic executable" (exit 1) for a static binary.
    const r = spawnSync('ldd', [p], { encoding: 'utf8' });
    if (/not a dynamic executable|statically linked/.test(`${r.stdout}${r.stderr}`)) return p;
  }
  return undefined;
}

/** Why runc-based tests cannot run here, or undefined when they can (the live probe is separate). */
export function runcUnavailableReason(): string | undefined {
  if (process.platform !== 'linux' || process.arch !== 'x64') return `runc tests need x86-64 Linux (this is ${process.platform}/${process.arch})`;
  if (process.getuid?.() !== 0) return 'runc tests run containers as root; this process is not root';
  if (!findRunc()) return 'runc is not installed (Debian package runc; .ci/run installs it)';
  if (!findStaticBusybox()) return 'a static busybox is not installed (Debian package busybox-static)';
  return undefined;
}

/** Why the node runtime cannot run here (runc, plus ip/skopeo/tar/mount for images and networks), or undefined. */
export function nodeUnavailableReason(): string | undefined {
  const reason = runcUnavailableReason();
  if (reason) return reason;
  for (const [tool, pkg] of [['ip', 'iproute2'], ['skopeo', 'skopeo'], ['tar', 'tar'], ['mount', 'mount']] as const) {
    if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0) return `${tool} is not installed (Debian package ${pkg})`;
  }
  return undefined;
}

export interface CommandResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command to completion without blocking the event loop (probes and pods keep running meanwhile). */
export function run(cmd: string, args: string[], options: { timeoutMs?: number; input?: string } = {}): Promise<CommandResult> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: [options.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    child.stderr!.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    if (options.input !== undefined) child.stdin!.end(options.input);
    const timer = options.timeoutMs ? setTimeout(() => child.kill('SIGKILL'), options.timeoutMs) : undefined;
    child.on('error', (e) => {
      if (timer) clearTimeout(timer);
      resolve({ code: 127, stdout, stderr: stderr + e.message });
    });
    child.on('close', (code, signal) => {
      if (timer) clearTimeout(timer);
      resolve({ code: code ?? (signal ? 128 + 9 : null), stdout, stderr });
    });
  });
}

/** Like run(), but throws with the command's stderr when it fails. */
export async function must(cmd: string, args: string[], options: { timeoutMs?: number } = {}): Promise<string> {
  const r = await run(cmd, args, options);
  if (r.code !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (exit ${r.code}): ${r.stderr.trim() || r.stdout.trim()}`);
  return r.stdout;
}
