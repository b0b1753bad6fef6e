/**
 * The functions the reliability suites run: well-behaved ones (cat, a dispatcher that echoes) and
 * faulty ones (hang, flood stdout or stderr, exit mid-write, killed by a signal, escape the
 * process group), written into a functions directory with a config.yaml mapping each to
 * example.com/<name in lower case>:v1.
 *
 * Every function runs in that directory (the exec runtime's working directory; the dispatcher
 * changes into it), so processes left behind can be found by their cwd (processes.ts).
 */
import {chmod, copyFile, mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {SCRIPTS, writeExecutable} from '../tmp.js'
import {writeHostileOutputs} from './hostile-outputs.js'

const RESOURCE_LIST = `apiVersion: config.kubernetes.io/v1
kind: ResourceList
items:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: out
`

/**
 * The wrapper server's entrypoint (it runs one entrypoint for every call): it echoes its input,
 * unless the first line is `# fnr-fault: NAME`, which makes it misbehave instead. It changes into
 * its own directory so processes it leaves behind can be found.
 */
export const DISPATCHER = `#!/bin/sh
cd "$(dirname "$0")" || exit 1
# The first 40 bytes decide (head -c never reads past them; a shell's read would go byte by byte
# through a long first line).
head="./.in.$$"
head -c 40 > "$head"
IFS= read -r first < "$head"
case "$first" in
  '# fnr-fault: hang') rm -f "$head"; exec sleep 60 ;;
  '# fnr-fault: flood-stdout') rm -f "$head"; cat >/dev/null; exec yes ;;
  '# fnr-fault: flood-stderr') rm -f "$head"; cat >/dev/null; exec yes >&2 ;;
  '# fnr-fault: exit-mid-write') rm -f "$head"; cat >/dev/null; printf '%s' '${RESOURCE_LIST.slice(0, 60)}'; exit 1 ;;
  '# fnr-fault: killed') rm -f "$head"; cat >/dev/null; printf partial; kill -KILL $$ ;;
  '# fnr-fault: not-a-resource-list') rm -f "$head"; cat >/dev/null; echo 'hello: world'; exit 0 ;;
  '# fnr-fault: setsid-escape') rm -f "$head"; cat >/dev/null; setsid sleep 30 & echo $! > "$0.escaped"; printf '%s' '${RESOURCE_LIST}'; exit 0 ;;
esac
cat "$head" -
status=$?
rm -f "$head"
exit $status
`

/** A ResourceList that makes the dispatcher misbehave. */
export function faultInput(name: string): Buffer {
  return Buffer.from(`# fnr-fault: ${name}\n${RESOURCE_LIST}`)
}

/** Shell functions (exec runtime; the exec evaluator starts them in the functions directory). */
export const FAULT_SCRIPTS: Record<string, string> = {
  cat: SCRIPTS.cat,
  sleep: SCRIPTS.sleep,
  sleepWithChild: SCRIPTS.sleepWithChild,
  env: SCRIPTS.env,
  failWithResults: SCRIPTS.failWithResults,
  /** Never reads its input and never ends. */
  hangNoRead: '#!/bin/sh\nexec sleep 60\n',
  /** 7 MiB on stdout, more than the server's message size. */
  floodStdout: SCRIPTS.flood,
  /** Writes stdout without end. */
  floodStdoutForever: '#!/bin/sh\ncat >/dev/null\nexec yes\n',
  /** 64 MiB on stderr, then a valid answer. */
  floodStderr: `#!/bin/sh\ncat >/dev/null\nhead -c 67108864 /dev/zero | tr '\\0' e >&2\ncat <<'YAML'\n${RESOURCE_LIST}YAML\n`,
  /** Writes stderr without end. */
  floodStderrForever: '#!/bin/sh\ncat >/dev/null\nexec yes >&2\n',
  /** Half a ResourceList, then exit 1. */
  exitMidWrite: `#!/bin/sh\ncat >/dev/null\nprintf '%s' '${RESOURCE_LIST.slice(0, 60)}'\nexit 1\n`,
  /** Half a ResourceList, then exit 0 (the exec runtime passes output through untouched). */
  exitMidWriteZero: `#!/bin/sh\ncat >/dev/null\nprintf '%s' '${RESOURCE_LIST.slice(0, 60)}'\nexit 0\n`,
  killedSelf: '#!/bin/sh\ncat >/dev/null\necho partial\nkill -KILL $$\n',
  terminatedSelf: '#!/bin/sh\ncat >/dev/null\nkill -TERM $$\nsleep 5\n',
  segfault: '#!/bin/sh\ncat >/dev/null\nkill -SEGV $$\nsleep 5\n',
  /** Closes stdin at once, so writing a large input to it fails with EPIPE. */
  closeStdin: `#!/bin/sh\nexec 0<&-\ncat <<'YAML'\n${RESOURCE_LIST}YAML\n`,
  /** Leaves a process in its own session holding stdout (it escapes the process-group kill). */
  setsidEscape: `#!/bin/sh\ncat >/dev/null\nsetsid sleep 30 &\necho $! > "$0.escaped"\ncat <<'YAML'\n${RESOURCE_LIST}YAML\nexit 0\n`,
  /** An error result whose message is 300 kB long, then exit 1. */
  hugeErrorResult: `#!/bin/sh\ncat >/dev/null\nprintf 'apiVersion: config.kubernetes.io/v1\\nkind: ResourceList\\nitems: []\\nresults:\\n- severity: error\\n  message: '\nhead -c 300000 /dev/zero | tr '\\0' x\nprintf '\\n'\nexit 1\n`,
  /** 20,000 error results, then exit 1. */
  manyErrorResults: `#!/bin/sh\ncat >/dev/null\nprintf 'apiVersion: config.kubernetes.io/v1\\nkind: ResourceList\\nitems: []\\nresults:\\n'\ni=0\nwhile [ $i -lt 20000 ]; do echo "- {severity: error, message: result $i}"; i=$((i+1)); done\nexit 1\n`,
  /** 300 kB of stderr on a single line, then exit 2. */
  hugeStderrLine: `#!/bin/sh\ncat >/dev/null\nhead -c 300000 /dev/zero | tr '\\0' s >&2\nexit 2\n`,
}

/** A file that must never run: it records any run in canary.ran. */
export const CANARY = '#!/bin/sh\ntouch "$(dirname "$0")/canary.ran"\ncat\n'

export interface FunctionsDir {
  dir: string
  functionsDir: string
  configPath: string
  /** Image of each function by script name (example.com/<lower>:v1). */
  image: Record<string, string>
  /** Path of the file the canary creates if it ever runs. */
  canaryMarker: string
}

export function imageOf(name: string): string {
  return `example.com/${name.toLowerCase()}:v1`
}

/** Writes FAULT_SCRIPTS, the dispatcher and the canary (and, when asked, the hostile-output function) into dir/functions, plus dir/config.yaml. */
export async function makeReliabilityFunctions(dir: string, options: {hostileOutputs?: boolean} = {}): Promise<FunctionsDir> {
  const functionsDir = path.join(dir, 'functions')
  await mkdir(functionsDir, {recursive: true})
  const image: Record<string, string> = {}
  const entries: string[] = []
  const scripts: Record<string, string> = {...FAULT_SCRIPTS, dispatcher: DISPATCHER}
  for (const [name, script] of Object.entries(scripts)) {
    await writeExecutable(path.join(functionsDir, name), script)
    image[name] = imageOf(name)
    entries.push(`- function: ${name}\n  images: [${imageOf(name)}]`)
  }
  // A copy of /bin/cat: the cheapest function there is (no shell), for load and health checks.
  await copyFile('/bin/cat', path.join(functionsDir, 'catBinary'))
  await chmod(path.join(functionsDir, 'catBinary'), 0o755)
  image.catBinary = imageOf('catBinary')
  entries.push(`- function: catBinary\n  images: [${imageOf('catBinary')}]`)
  // Hostile outputs (hostile-outputs.ts; ~11 MB of files, for the suites that use them): the input
  // picks the shape; the function fails.
  if (options.hostileOutputs) {
    await writeHostileOutputs(functionsDir)
    image.hostileOutput = imageOf('hostileOutput')
    entries.push(`- function: hostileOutput\n  images: [${imageOf('hostileOutput')}]`)
  }
  // The canary is in the directory but mapped to no image.
  await writeExecutable(path.join(functionsDir, 'canary'), CANARY)
  const configPath = path.join(dir, 'config.yaml')
  await writeFile(configPath, `functions:\n${entries.join('\n')}\n`)
  return {dir, functionsDir, configPath, image, canaryMarker: path.join(functionsDir, 'canary.ran')}
}

export {RESOURCE_LIST as GOOD_OUTPUT}
