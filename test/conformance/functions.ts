/**
 * The same function binaries for kpt and for fnr. An image of the functions catalog
 * (`ghcr.io/kptdev/krm-functions-catalog/NAME[:TAG|@DIGEST]`, `gcr.io/kpt-fn/NAME…`, or a bare
 * `NAME:TAG`, which both tools complete with the catalog's prefix) runs the catalog binary NAME the
 * peers build (scripts/catalog-peers.mjs), whatever its tag: kpt through a `docker` shim first on
 * its PATH, fnr through an exec config (fnr's exec runtime). An image of a function that is not
 * built makes its case "not runnable"; the images kpt's cases name on purpose as missing get
 * docker's own "not found" answer from the shim.
 */
import {writeFile} from 'node:fs/promises'
import path from 'node:path'

import {quote} from 'shell-quote'
import {stringify} from 'yaml'

import {writeExecutable} from '../support/tmp.js'

const CATALOG_PREFIXES = ['ghcr.io/kptdev/krm-functions-catalog/', 'gcr.io/kpt-fn/']
export const DEFAULT_PREFIX = CATALOG_PREFIXES[0]

/** Images kpt's cases name because they do not exist (their cases expect the runtime's error). */
export const MISSING_ON_PURPOSE = new Set(['ghcr.io/kptdev/krm-functions-catalog/dne', 'ghcr.io/kptdev/krm-functions-catalog/not-exist:latest'])

/** The catalog function an image names (`set-namespace` for `…/set-namespace:v0.2.0`), or undefined. */
export function catalogFunction(image: string): string | undefined {
  let rest: string | undefined
  if (!image.includes('/')) rest = image
  else for (const p of CATALOG_PREFIXES) if (image.startsWith(p)) rest = image.slice(p.length)
  if (rest === undefined || rest.includes('/')) return undefined
  return rest.split('@')[0].split(':')[0] || undefined
}

/** The full name kpt and fnr give an image (bare names get the catalog's prefix). */
export const fullImage = (image: string): string => (image.includes('/') ? image : `${DEFAULT_PREFIX}${image}`)

/** Why an image cannot run here, or undefined when it can (or is missing on purpose). */
export function unrunnable(image: string, binaries: ReadonlyMap<string, string>): string | undefined {
  if (MISSING_ON_PURPOSE.has(fullImage(image))) return undefined
  const fn = catalogFunction(image)
  if (fn === undefined) return `image ${image}: not a catalog function`
  if (!binaries.has(fn)) return `image ${image}: function ${fn} is not built here`
  return undefined
}

/** Writes fnr's exec config mapping every given image of a built function to its binary; returns its path. */
export async function writeExecConfig(file: string, images: readonly string[], binaries: ReadonlyMap<string, string>): Promise<string> {
  const byFn = new Map<string, Set<string>>()
  for (const image of images) {
    const fn = catalogFunction(image)
    if (fn === undefined || !binaries.has(fn)) continue
    const set = byFn.get(fn) ?? new Set<string>()
    set.add(fullImage(image))
    byFn.set(fn, set)
  }
  const functions = [...byFn].sort(([a], [b]) => a.localeCompare(b)).map(([fn, set]) => ({function: fn, images: [...set].sort()}))
  await writeFile(file, stringify({functions}))
  return file
}

/**
 * A `docker` for kpt (which runs `image:` functions with `docker run --rm -i … IMAGE`): `docker
 * version` answers, `docker run` runs the image's catalog binary with the run's `-e` variables,
 * stdin and stdout passed through; an image missing on purpose gets docker's own error (exit 125);
 * anything else is refused with a line naming it (exit 125).
 */
export async function writeDockerShim(dir: string, binaries: ReadonlyMap<string, string>): Promise<string> {
  const arms: string[] = []
  for (const [fn, bin] of [...binaries].sort(([a], [b]) => a.localeCompare(b))) {
    // Names are [a-z0-9-] (catalog-peers.mjs), so the patterns need no quoting; the binary's path is quoted.
    if (!/^[a-z0-9-]+$/.test(fn)) throw new Error(`unexpected function name ${fn}`)
    const patterns = [...CATALOG_PREFIXES.map((p) => `${p}${fn}`), fn].flatMap((n) => [n, `${n}:*`, `${n}@*`])
    arms.push(`  ${patterns.join('|')}) exec ${quote([bin])} ;;`)
  }
  const missing = [...MISSING_ON_PURPOSE].map((m) => quote([m])).join('|')
  const script = `#!/bin/sh
# docker for kpt in fnr's conformance suite (test/conformance/functions.ts): runs catalog images as the built binaries.
case "$1" in
  version) echo 27.0.0; exit 0 ;;
  run) shift ;;
  *) echo "docker (conformance shim): 'docker $*' is not available here" >&2; exit 125 ;;
esac
pull=missing
while [ $# -gt 0 ]; do
  case "$1" in
    --rm|-i|--interactive|--security-opt=*|--network=*|--user=*|--pull=*) case "$1" in --pull=*) pull=\${1#--pull=} ;; esac; shift ;;
    --pull) pull=$2; shift 2 ;;
    --network|--user|--security-opt|--mount|-v|--volume|--name|-w|--workdir) shift 2 ;;
    -e|--env) export "$2"; shift 2 ;;
    --) shift; break ;;
    -*) echo "docker (conformance shim): option $1 is not supported" >&2; exit 125 ;;
    *) break ;;
  esac
done
image=$1
case "$image" in
${arms.join('\n')}
  ${missing})
    if [ "$pull" = never ]; then echo "docker: Error response from daemon: No such image: $image." >&2
    else
      tag=latest repo=$image
      case "$image" in *:*) tag=\${image##*:} repo=\${image%:*} ;; esac
      echo "Unable to find image '$image' locally" >&2
      echo "docker: Error response from daemon: Head \\"https://ghcr.io/v2/\${repo#ghcr.io/}/manifests/$tag\\": denied." >&2
    fi
    echo "See 'docker run --help'." >&2
    exit 125 ;;
  *) echo "docker (conformance shim): image $image is not built here" >&2; exit 125 ;;
esac
`
  return writeExecutable(path.join(dir, 'docker'), script)
}
