/**
 * Small helpers for tests that use the test bed: pod predicates and tiny local "container" commands.
 */
import type { KubeObject } from './status.js';

/** True when the pod has condition Ready=True. */
export function isPodReady(pod: KubeObject | undefined): boolean {
  return !!pod?.status?.conditions?.some((c: KubeObject) => c.type === 'Ready' && c.status === 'True');
}

export function podPhase(pod: KubeObject | undefined): string | undefined {
  return pod?.status?.phase;
}

/** The main container's status (named `function`, else the first). */
export function mainContainerStatus(pod: KubeObject | undefined): KubeObject | undefined {
  const statuses: KubeObject[] = pod?.status?.containerStatuses ?? [];
  return statuses.find((s) => s.name === 'function') ?? statuses[0];
}

/**
 * A command that runs a tiny HTTP server on $FNR_BIND_ADDRESS:<port> answering `<POD_NAME> <text>`, and exits 0 on
 * SIGTERM. Uses the current Node binary.
 */
export function httpServerCommand(port: number, text = 'ok'): string[] {
  const script = [
    "const http = require('http');",
    `const server = http.createServer((req, res) => res.end(process.env.POD_NAME + ' ' + ${JSON.stringify(text)}));`,
    `server.listen(${port}, process.env.FNR_BIND_ADDRESS || '127.0.0.1', () => console.log('listening on ' + process.env.FNR_BIND_ADDRESS + ':${port}'));`,
    "process.on('SIGTERM', () => { console.log('got SIGTERM'); server.close(); process.exit(0); });",
  ].join(' ');
  return [process.execPath, '-e', script];
}

/** A command that sleeps (in Node, so it is there on any machine) and exits 0 on SIGTERM. */
export function sleepCommand(seconds = 3600): string[] {
  return [process.execPath, '-e', `setTimeout(() => {}, ${seconds * 1000}); process.on('SIGTERM', () => process.exit(0));`];
}

/** A command that ignores SIGTERM (so only SIGKILL after the grace period stops it). */
export function stubbornCommand(): string[] {
  return [process.execPath, '-e', "process.on('SIGTERM', () => console.log('ignoring SIGTERM')); setInterval(() => {}, 1000); console.log('started');"];
}

/** A command that prints something and exits with a code. */
export function exitCommand(code: number, text = 'bye'): string[] {
  return [process.execPath, '-e', `console.log(${JSON.stringify(text)}); process.exit(${code});`];
}

/** Whether a process (or process group leader) is still alive. */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Polls `check` every `intervalMs` until it returns a truthy value; rejects after `timeoutMs` (default 20 s). */
export async function eventually<T>(check: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 20_000, intervalMs = 20): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
