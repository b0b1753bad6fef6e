/**
 * Sleeps that end early on demand: a pod worker waits out a back-off or a probe period, and a
 * deletion or status change wakes every waiter at once. Used by the LocalKubelet (kubelet.ts) and
 * the runc node's pod workers (../node/pod.ts).
 */
export class Naps {
  private readonly wakers = new Set<() => void>();

  /** Resolves after `ms`, or sooner when wakeAll() is called. */
  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.wakers.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wakers.add(done);
    });
  }

  /** Ends every sleep in progress. */
  wakeAll(): void {
    for (const w of [...this.wakers]) w();
  }
}
