/**
 * KRM functions for the wrapper-server tests, written into a temp dir: shell scripts (#!/bin/sh,
 * for the host and for busybox root filesystems) and Node scripts (run as [node, script]).
 */
import {mkdir} from 'node:fs/promises'
import path from 'node:path'

import {SCRIPTS, writeExecutable} from '../../support/tmp.js'

export const RL_HEADER = 'apiVersion: config.kubernetes.io/v1\nkind: ResourceList\n'

/** Shell functions (POSIX sh + busybox-compatible tools only). */
export const SHELL_FUNCTIONS = {
  cat: '#!/bin/sh\nexec cat\n',
  /** Echoes its arguments as a ConfigMap, ignoring stdin: checks that ENTRYPOINT ARGS arrive unchanged. */
  args: `#!/bin/sh
cat >/dev/null
printf 'apiVersion: config.kubernetes.io/v1\\nkind: ResourceList\\nitems: []\\n# argc=%s\\n' "$#"
for a in "$@"; do printf '# arg=[%s]\\n' "$a"; done
`,
  stderr: SCRIPTS.stderr,
  /** Replaces the namespace "old" with "new", like Porch's wrapper test (sed instead of awk). */
  setNamespace: '#!/bin/sh\nsed "s/namespace: old/namespace: new/"\n',
  failWithResults: SCRIPTS.failWithResults,
  /** Exit 0, but with an error-severity result: upstream returns success, and so do we. */
  okWithErrorResults: `#!/bin/sh
cat >/dev/null
cat <<'YAML'
apiVersion: config.kubernetes.io/v1
kind: ResourceList
items: []
results:
- message: image tag is not pinned
  severity: error
  resourceRef: {apiVersion: v1, kind: Pod, name: p}
YAML
`,
  /** Echoes its input and exits 1 (Porch's wrapper test). */
  echoAndFail: '#!/bin/sh\ncat\nexit 1\n',
  empty: '#!/bin/sh\ncat >/dev/null\n',
  blank: '#!/bin/sh\ncat >/dev/null\nprintf "\\n  \\n"\n',
  /** A single scalar: not a ResourceList (Porch's "invalid YAML" case). */
  notResourceList: '#!/bin/sh\ncat >/dev/null\necho "just a string"\necho "bad things" >&2\n',
  sleep: '#!/bin/sh\ncat >/dev/null\nsleep 60\n',
  /** Starts a grandchild that records its pid next to the script (when writable), then hangs. */
  sleepWithChild: '#!/bin/sh\ncat >/dev/null\nsleep 60 &\necho $! > "${PIDFILE:-$0.child}"\nwait\n',
  slowCat: '#!/bin/sh\nsleep 1\nexec cat\n',
  /** Like slowCat and sleep, but first create "$0.started" so a test can wait for the call to be in flight. */
  markedSlowCat: '#!/bin/sh\n: > "$0.started"\nsleep 1\nexec cat\n',
  markedSleep: '#!/bin/sh\ncat >/dev/null\n: > "$0.started"\nsleep 60\n',
  /** Hangs when the input contains "# slow", else echoes it. */
  sleepIfAsked: '#!/bin/sh\ninput=$(cat)\ncase "$input" in *"# slow"*) sleep 60 ;; esac\nprintf "%s\\n" "$input"\n',
  /** 7 MiB of output. */
  flood: '#!/bin/sh\ncat >/dev/null\nhead -c 7340032 /dev/zero | tr "\\0" "a"\n',
  /** The environment and working directory, as comments of an empty ResourceList. */
  env: '#!/bin/sh\ncat >/dev/null\necho "kind: ResourceList"\nenv | sed "s/^/# /"\n',
  pwd: '#!/bin/sh\ncat >/dev/null\necho "kind: ResourceList"\necho "# cwd=$(pwd)"\n',
} as const

export type ShellFunction = keyof typeof SHELL_FUNCTIONS

/**
 * A Node function (no dependencies): adds the annotation fnr.test/seen-by=<pid> to every item of
 * a JSON or YAML-ish ResourceList by rewriting "metadata:" lines, writes a line to stderr, and
 * exits with the code in the functionConfig line "# exit=N" if there is one.
 */
export const NODE_ANNOTATE = `
const chunks = []
process.stdin.on('data', (c) => chunks.push(c))
process.stdin.on('end', () => {
  const input = Buffer.concat(chunks).toString('utf8')
  const out = input.replace(/^(\\s*)metadata:\\n/gm, (m, indent) => m + indent + '  annotations: {fnr.test/seen-by: "node"}\\n')
  process.stderr.write('annotated by node ' + process.pid + '\\n')
  process.stdout.write(out)
  const exit = /# exit=(\\d+)/.exec(input)
  process.exitCode = exit ? Number(exit[1]) : 0
})
`

/** A Node function that prints a JSON ResourceList with one error result and exits 2. */
export const NODE_FAIL_JSON = `
process.stdin.resume()
process.stdin.on('end', () => {
  process.stdout.write(JSON.stringify({apiVersion: 'config.kubernetes.io/v1', kind: 'ResourceList', items: [],
    results: [{message: 'from node', severity: 'error', resourceRef: {apiVersion: 'v1', kind: 'ConfigMap', name: 'cfg'}}]}))
  process.stderr.write('node says no\\n')
  process.exitCode = 2
})
`

export async function writeShellFunctions(dir: string): Promise<Record<ShellFunction, string>> {
  await mkdir(dir, {recursive: true})
  const out = {} as Record<ShellFunction, string>
  for (const [name, script] of Object.entries(SHELL_FUNCTIONS)) out[name as ShellFunction] = await writeExecutable(path.join(dir, name), script)
  return out
}

export async function writeNodeFunctions(dir: string): Promise<{annotate: string; failJson: string}> {
  await mkdir(dir, {recursive: true})
  return {
    annotate: await writeExecutable(path.join(dir, 'annotate.cjs'), NODE_ANNOTATE),
    failJson: await writeExecutable(path.join(dir, 'fail-json.cjs'), NODE_FAIL_JSON),
  }
}

export function resourceList(items: string, extra = ''): Buffer {
  return Buffer.from(`${RL_HEADER}items:\n${items}${extra}`)
}

export const CONFIGMAP_OLD_NS = resourceList(`- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: cfg
    namespace: old
  data:
    k: v
`)

/**
 * One shell function with several behaviours, chosen by a "# mode=…" line in the input (see
 * markedInput), for places that run a single entrypoint (containers, pods). Needs only sh, sed,
 * head, tr and sleep (busybox has them). In slow mode it first creates $STARTED_FILE, if set.
 */
export const MULTI_MODE_FUNCTION = `#!/bin/sh
input=$(cat)
case "$input" in
  *"# mode=fail"*)
    echo "fatal: from the container" >&2
    printf 'apiVersion: config.kubernetes.io/v1\\nkind: ResourceList\\nitems: []\\nresults:\\n- message: bad replicas\\n  severity: error\\n'
    exit 3 ;;
  *"# mode=hang"*) sleep 60 & wait ;;
  *"# mode=slow"*) [ -z "$STARTED_FILE" ] || : > "$STARTED_FILE"; sleep 1; printf '%s\\n' "$input" ;;
  *"# mode=flood"*) head -c 7340032 /dev/zero | tr "\\0" a ;;
  *"# mode=env"*) echo "kind: ResourceList"; env | sed "s/^/# /" ;;
  *) printf '%s\\n' "$input" | sed "s/namespace: old/namespace: new/" ;;
esac
`

/** SAMPLE_RL-like input with a "# mode=…" line for MULTI_MODE_FUNCTION. */
export function markedInput(mode: string, base: Buffer = CONFIGMAP_OLD_NS): Buffer {
  return Buffer.from(`${base.toString()}# mode=${mode}\n`)
}
