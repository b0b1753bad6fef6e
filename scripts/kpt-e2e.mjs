// kpt's own end-to-end cases for `kpt fn eval` and `kpt fn render` (e2e/testdata/fn-eval and
// fn-render of github.com/kptdev/kpt), fetched once into the git-ignored .cache/peers/kpt-e2e/ for
// the conformance suite (test/conformance/, docs/conformance.md). The only route is the Go module
// proxy: the module's zip holds e2e/testdata. The proxy serves v1.0.0-beta.61 of the module and
// refuses the installed kpt's v1.0.0-beta.56 (and beta.55, beta.57), so the cases are beta.61's.
// Nothing is copied into the repository. Only Node built-ins: build-peers.mjs runs it.
//
//   node scripts/kpt-e2e.mjs      # prints the folder; a few seconds, nothing when already there
import {spawnSync} from 'node:child_process'
import {cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'

const ROOT = fileURLToPath(new URL('..', import.meta.url))

export const KPT_MODULE = 'github.com/kptdev/kpt'
/** The version the proxy serves (the installed kpt is v1.0.0-beta.56, which it refuses). */
export const KPT_E2E_VERSION = 'v1.0.0-beta.61'
/** The case folders taken from the module's e2e/testdata. */
export const KPT_E2E_SUITES = ['fn-eval', 'fn-render']
/** Where the cases go: <dir>/fn-eval, <dir>/fn-render, <dir>/LICENSE, <dir>/.source (what and from where). */
export const KPT_E2E_DIR = path.join(ROOT, '.cache', 'peers', 'kpt-e2e', KPT_E2E_VERSION)

const stampOf = (dir) => path.join(dir, '.source')
const wantedStamp = () => `${KPT_MODULE}@${KPT_E2E_VERSION} e2e/testdata/{${KPT_E2E_SUITES.join(',')}}\n`

/** True when the cases are in place. */
export function kptE2eFetched(dir = KPT_E2E_DIR) {
  return existsSync(stampOf(dir)) && readFileSync(stampOf(dir), 'utf8').startsWith(wantedStamp())
}

/**
 * Fetches the cases (unless they are there) and returns their folder. Throws with the Go
 * command's own message when the proxy does not answer. The folder appears whole or not at all
 * (written beside it, then renamed), so a concurrent reader never sees half of it.
 */
export function fetchKptE2e({dir = KPT_E2E_DIR, log = (m) => process.stderr.write(`kpt-e2e: ${m}\n`)} = {}) {
  if (kptE2eFetched(dir)) return dir
  const started = Date.now()
  // Outside the repository: the module is downloaded, not added to any go.mod.
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'kpt-e2e-go-'))
  try {
    const r = spawnSync('go', ['mod', 'download', '-json', `${KPT_MODULE}@${KPT_E2E_VERSION}`], {cwd: scratch, encoding: 'utf8', env: {...process.env, GOFLAGS: '-mod=mod'}, maxBuffer: 16 * 1024 * 1024})
    let info = {}
    try {
      info = JSON.parse(r.stdout)
    } catch {
      // reported below with Go's stderr
    }
    if (r.error || r.status !== 0 || !info.Dir) {
      throw new Error(`go mod download ${KPT_MODULE}@${KPT_E2E_VERSION} failed: ${info.Error ?? r.error?.message ?? `${r.stderr}`.trim()}`)
    }
    mkdirSync(path.dirname(dir), {recursive: true})
    const tmp = mkdtempSync(`${dir}.partial-`)
    for (const suite of KPT_E2E_SUITES) {
      const src = path.join(info.Dir, 'e2e', 'testdata', suite)
      if (!existsSync(src)) throw new Error(`${KPT_MODULE}@${KPT_E2E_VERSION} has no e2e/testdata/${suite}`)
      cpSync(src, path.join(tmp, suite), {recursive: true})
    }
    cpSync(path.join(info.Dir, 'LICENSE'), path.join(tmp, 'LICENSE'))
    // The module cache's files are read-only; the copies must be removable and copyable.
    spawnSync('chmod', ['-R', 'u+w', tmp])
    writeFileSync(stampOf(tmp), `${wantedStamp()}from the Go module proxy: ${info.Zip ?? info.Dir} (${info.Sum ?? 'no sum'})\n`)
    rmSync(dir, {recursive: true, force: true})
    renameSync(tmp, dir)
    log(`fetched ${KPT_MODULE}@${KPT_E2E_VERSION} e2e cases into ${path.relative(ROOT, dir)} in ${((Date.now() - started) / 1000).toFixed(1)} s`)
    return dir
  } finally {
    rmSync(scratch, {recursive: true, force: true})
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    process.stdout.write(`${fetchKptE2e()}\n`)
  } catch (err) {
    process.stderr.write(`kpt-e2e: ${err.message}\n`)
    process.exit(1)
  }
}
