import {chmod, mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'

/**
 * Hostile shapes of a function's output (docs/process.md): what process/results.ts must read in
 * bounded time and memory. Used by bench/results-parse.ts (time, heap, RSS of one read) and by the
 * memory-limit suite (many at once, inside the Deployment's memory limit).
 */
const HEADER = 'apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\nresults:\n'
const RESULT =
  '- message: "replicas must be at most 3 for this deployment"\n  severity: error\n' +
  '  resourceRef: {apiVersion: apps/v1, kind: Deployment, name: web, namespace: prod}\n  field: {path: spec.replicas}\n'

export const HOSTILE_OUTPUTS: Record<string, () => string> = {
  /** 3 MB of `- a` lines. */
  'dash-a-3MB': () => HEADER + '- a\n'.repeat(750_000),
  /** 6 MB of ordinary structured results. */
  'structured-6MB': () => HEADER + RESULT.repeat(Math.ceil(6e6 / RESULT.length)),
  /** One result nested 100,000 levels deep in flow style. */
  'flow-nesting-100k': () => `${HEADER}- message: deep\n  severity: error\n  tags: ${'['.repeat(100_000)}${']'.repeat(100_000)}\n`,
  /** 1 MB of blank lines inside the results. */
  'blank-run-1MB': () => `${HEADER}- message: a\n${'\n'.repeat(1_000_000)}- message: b\n`,
  /** Many aliases to one anchor. */
  'aliases-100k': () => `${HEADER}- &r {message: a, severity: error}\n${'- *r\n'.repeat(100_000)}`,
}

/**
 * A function that writes the hostile output its input names (a `# hostile: SHAPE` line) from the
 * files writeHostileOutputs made next to it, then fails (exit 1), so the runner reads its results.
 */
export const HOSTILE_FUNCTION = `#!/bin/sh
shape=$(sed -n 's/^# hostile: //p')
cat "$(dirname "$0")/hostile-outputs/$shape"
exit 1
`

/** Writes each shape to DIR/hostile-outputs/SHAPE and the function to DIR/hostileOutput. */
export async function writeHostileOutputs(dir: string): Promise<string> {
  await mkdir(path.join(dir, 'hostile-outputs'), {recursive: true})
  for (const [shape, make] of Object.entries(HOSTILE_OUTPUTS)) await writeFile(path.join(dir, 'hostile-outputs', shape), make())
  const fn = path.join(dir, 'hostileOutput')
  await writeFile(fn, HOSTILE_FUNCTION)
  await chmod(fn, 0o755)
  return fn
}

/** The input that asks HOSTILE_FUNCTION for a shape. */
export function hostileInput(shape: string): Buffer {
  return Buffer.from(`apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n# hostile: ${shape}\n`)
}
