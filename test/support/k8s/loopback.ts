/**
 * Hands out distinct loopback addresses for pods. Linux routes all of 127.0.0.0/8 to `lo`, so every pod can bind
 * the same port on its own address. Addresses are never reused within a process.
 *
 * By default each process picks a random /24 block `127.A.B.0` (A in 100..199) and hands out .2, .3, ... upwards,
 * continuing in the next /24 when one is used up. A random block per process keeps test runs that happen at the same
 * time on one machine (several engineers, several mocha processes) from colliding on the same address and port.
 * Pass an explicit prefix such as `127.0.0` to get 127.0.0.2, 127.0.0.3, ... instead.
 */

function randomInt(n: number): number {
  return Math.floor(Math.random() * n);
}

export const DEFAULT_POD_IP_PREFIX = `127.${100 + randomInt(100)}.${randomInt(256)}`;

const cursors = new Map<string, { a: number; b: number; c: number; next: number }>();

export function allocateLoopbackAddress(prefix: string = DEFAULT_POD_IP_PREFIX): string {
  let cursor = cursors.get(prefix);
  if (!cursor) {
    const parts = prefix.split('.').map(Number);
    if (parts.length !== 3 || parts[0] !== 127 || parts.some((p) => !Number.isInteger(p) || p < 0 || p > 255)) {
      throw new Error(`pod IP prefix must look like 127.X.Y, got ${prefix}`);
    }
    cursor = { a: parts[0]!, b: parts[1]!, c: parts[2]!, next: 2 };
    cursors.set(prefix, cursor);
  }
  if (cursor.next > 254) {
    cursor.next = 2;
    cursor.c += 1;
    if (cursor.c > 255) {
      cursor.c = 0;
      cursor.b = (cursor.b + 1) % 256;
    }
  }
  const address = `${cursor.a}.${cursor.b}.${cursor.c}.${cursor.next}`;
  cursor.next += 1;
  return address === '127.0.0.1' ? allocateLoopbackAddress(prefix) : address;
}
