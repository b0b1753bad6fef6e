/**
 * Running the real kubectl against a test cluster: one-shot commands and long-running ones such as `get -w`.
 */
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';

/** The kubectl binary: $KUBECTL, else /usr/bin/kubectl. */
export const KUBECTL_PATH = process.env.KUBECTL ?? '/usr/bin/kubectl';

export function kubectlAvailable(): boolean {
  return existsSync(KUBECTL_PATH);
}

export interface KubectlTarget {
  kubeconfigPath: string;
  /** kubectl's discovery cache dir; keep it inside the test's temp dir so nothing lands in ~/.kube. */
  cacheDir?: string;
}

export interface KubectlResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface KubectlOptions {
  /** Written to stdin (for `-f -`). */
  input?: string;
  /** Kill kubectl after this long. Default 60 s. */
  timeoutMs?: number;
}

function baseArgs(target: KubectlTarget): string[] {
  const args = ['--kubeconfig', target.kubeconfigPath];
  if (target.cacheDir) args.push('--cache-dir', target.cacheDir);
  return args;
}

/** Runs kubectl to completion. Never rejects for a non-zero exit: check `code`. */
export function runKubectl(target: KubectlTarget, args: string[], options: KubectlOptions = {}): Promise<KubectlResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(KUBECTL_PATH, [...baseArgs(target), ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 60_000);
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code: code ?? (signal ? 128 : 0), stdout, stderr });
    });
    child.stdin.end(options.input ?? '');
  });
}

/** A kubectl process that keeps running (e.g. `get -w`), with its output collected line by line. */
export class KubectlStream {
  readonly lines: string[] = [];
  stderr = '';
  private readonly child: ChildProcess;
  private readonly waiters = new Set<() => void>();
  private partial = '';
  readonly exited: Promise<number>;

  constructor(target: KubectlTarget, args: string[]) {
    this.child = spawn(KUBECTL_PATH, [...baseArgs(target), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      this.partial += chunk;
      const parts = this.partial.split('\n');
      this.partial = parts.pop() ?? '';
      this.lines.push(...parts);
      for (const w of [...this.waiters]) w();
    });
    this.child.stderr!.setEncoding('utf8').on('data', (c: string) => (this.stderr += c));
    this.exited = new Promise((resolve) => {
      this.child.once('close', (code) => {
        if (this.partial) this.lines.push(this.partial);
        this.partial = '';
        for (const w of [...this.waiters]) w();
        resolve(code ?? 0);
      });
    });
  }

  /** Resolves once `predicate` holds for the lines so far; rejects after timeoutMs (default 20 s). */
  waitFor(predicate: (lines: string[]) => boolean, timeoutMs = 20_000): Promise<string[]> {
    return new Promise((resolve, reject) => {
      const check = (): void => {
        if (predicate(this.lines)) {
          cleanup();
          resolve(this.lines);
        }
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(new Error(`kubectl output did not match within ${timeoutMs} ms:\n${this.lines.join('\n')}\nstderr: ${this.stderr}`));
      }, timeoutMs);
      const cleanup = (): void => {
        clearTimeout(timer);
        this.waiters.delete(check);
      };
      this.waiters.add(check);
      check();
    });
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGTERM');
    await this.exited;
  }
}
