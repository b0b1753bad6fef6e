/** Temp dirs and small executables for tests; everything made here is removed by cleanup(). */
import {chmod, mkdtemp, rm, writeFile} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'

export class TempDirs {
  private dirs: string[] = []

  async make(prefix = 'fnr-test-'): Promise<string> {
    const dir = await mkdtemp(path.join(os.tmpdir(), prefix))
    this.dirs.push(dir)
    return dir
  }

  async cleanup(): Promise<void> {
    await Promise.all(this.dirs.splice(0).map((d) => rm(d, {recursive: true, force: true})))
  }
}

/** Writes an executable script (mode 755). */
export async function writeExecutable(file: string, content: string): Promise<string> {
  await writeFile(file, content)
  await chmod(file, 0o755)
  return file
}

/** A few shell functions used across tests. */
export const SCRIPTS = {
  cat: '#!/bin/sh\nexec cat\n',
  stderr: '#!/bin/sh\necho "working on it" >&2\nexec cat\n',
  failWithResults: `#!/bin/sh
cat >/dev/null
echo "fatal: boom" >&2
cat <<'YAML'
apiVersion: config.kubernetes.io/v1
kind: ResourceList
items: []
results:
- message: replicas must be at most 3
  severity: error
  resourceRef: {apiVersion: apps/v1, kind: Deployment, name: web, namespace: prod}
  field: {path: spec.replicas}
- message: just saying
  severity: info
YAML
exit 3
`,
  sleep: '#!/bin/sh\ncat >/dev/null\nsleep 30\n',
  /** Starts a grandchild that records its pid, then hangs. */
  sleepWithChild: '#!/bin/sh\ncat >/dev/null\nsleep 60 &\necho $! > "$0.child"\nwait\n',
  /** Writes N MiB of output (N from the script name's suffix via env-less heredoc: fixed 7 MiB). */
  flood: '#!/bin/sh\ncat >/dev/null\nhead -c 7340032 /dev/zero | tr "\\0" "a"\n',
  slowCat: '#!/bin/sh\nsleep 1\nexec cat\n',
  env: '#!/bin/sh\ncat >/dev/null\nenv\n',
}

export const SAMPLE_RL = Buffer.from(`apiVersion: config.kubernetes.io/v1
kind: ResourceList
items:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: cfg
  data:
    k: v
`)
