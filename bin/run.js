#!/bin/sh
':' //; case "$1" in serve|wrapper-server) exec node --expose-gc --disable-sigusr1 "$0" "$@" ;; esac; exec node "$0" "$@"
// The fnr executable. The two lines above are read twice: run as a program (a shell's `fnr …`, a
// pod whose command is `fnr serve`), /bin/sh runs the second one, which starts Node on this file
// (`node` from PATH, as `#!/usr/bin/env node` would), with the server flags for the long-running
// servers; Node then reads it as a string and a comment. Three things happen before any command runs:
//
// - The long-running servers (`fnr serve`, `fnr wrapper-server`) need two Node flags on their
//   command line: --expose-gc (src/lib/reclaim.ts asks V8 for full collections) and
//   --disable-sigusr1 (SIGUSR1 would otherwise open Node's inspector on 127.0.0.1:9229, and any
//   loopback neighbour could then run code as the runner). Run as a program, the second line
//   passes them, so Node has them from its first instruction and starts once. Started through
//   `node bin/run.js …` without them, the process replaces itself with the same command plus the
//   flags (process.execve: same pid, same environment, same open stdio; one more Node start,
//   docs/performance.md "bench S"). The images pass the flags themselves (docker/).
// - SIGUSR1 gets a listener of its own in every command: with a listener installed, Node does not
//   start the inspector on it (the fallback where the flag cannot be had, and harmless elsewhere).
// - Node's compile cache (module.enableCompileCache: V8 bytecode of every module loaded, kept in
//   the OS temporary folder or NODE_COMPILE_CACHE) spares later runs parsing and compiling.
//
// `fnr eval …`, `fnr render …`, `fnr source …` and `fnr sink …` are on users' hot paths (kpt pipelines, kpt's e2e scripts, CI
// loops): they skip loading oclif and parse their flags with the same specs the oclif commands use. `fnr serve …` skips oclif too
// (start → SERVING; docs/performance.md "bench S"), for the command lines src/cli/fast-serve.ts
// takes. Everything else, including `--help`, `--runner` and `--json`, goes through
// oclif (as does everything when FNR_NO_FAST_PATH is set).
const args = process.argv.slice(2)
if (args[0] === 'serve' || args[0] === 'wrapper-server') relaunchWithServerFlags()
process.on('SIGUSR1', () => {})
process.getBuiltinModule('node:module').enableCompileCache?.()

// `fnr --version` prints what oclif prints, without loading it (kpt-style scripts call it often:
// ~110 ms instead of ~250 ms on Node 26; test/cli/version.test.ts compares the two).
if (args.length === 1 && args[0] === '--version' && !process.env.FNR_NO_FAST_PATH) {
  const {version} = JSON.parse(process.getBuiltinModule('node:fs').readFileSync(new URL('../package.json', import.meta.url), 'utf8'))
  process.stdout.write(`fnr/${version} ${process.platform}-${process.arch} node-${process.version}\n`)
  process.exit(0)
}

const beforeDash = args.indexOf('--') >= 0 ? args.slice(0, args.indexOf('--')) : args
// --runner needs the gRPC client, which only the oclif command loads; --json (and oclif's
// FNR_CONTENT_TYPE=json) is oclif's JSON output.
const oclifOnly = (a) => a === '--help' || a === '-h' || a === '--runner' || a.startsWith('--runner=') || a === '--json' || a.startsWith('--json=')
// `fnr serve …` (not --help) starts without oclif too, when src/cli/fast-serve.ts is sure to read
// the command line as the oclif command would; otherwise (and for every flag error) it returns
// undefined before starting anything and oclif runs the command.
let served
if (args[0] === 'serve' && !process.env.FNR_NO_FAST_PATH && !beforeDash.some(oclifOnly)) {
  setShellWhenUnknown()
  const {runServeFast} = await importBundle('../dist/bundles/serve/fast-serve.bundle.mjs', '../dist/cli/fast-serve.js')
  served = await runServeFast(args.slice(1))
  if (served !== undefined) process.exitCode = served
}
if (served !== undefined) {
  // `fnr serve` ran (or failed to start) without oclif.
} else if (args[0] === 'eval' && !process.env.FNR_NO_FAST_PATH && process.env.FNR_CONTENT_TYPE?.toLowerCase() !== 'json' && !beforeDash.some(oclifOnly)) {
  const {runEvalFast} = await importBundle('../dist/bundles/eval/fast-eval.bundle.mjs', '../dist/cli/fast-eval.js')
  process.exitCode = await runEvalFast(args.slice(1))
} else if (args[0] === 'render' && !process.env.FNR_NO_FAST_PATH && !args.slice(1).some(oclifOnly)) {
  // render has no --json (oclif refuses it in kpt's form) and no `--` (its arguments after the
  // package are ignored, so a flag anywhere counts)
  const {runRenderFast} = await importBundle('../dist/bundles/render/fast-render.bundle.mjs', '../dist/cli/fast-render.js')
  process.exitCode = await runRenderFast(args.slice(1))
} else if ((args[0] === 'source' || args[0] === 'sink') && !process.env.FNR_NO_FAST_PATH && !beforeDash.some(oclifOnly)) {
  // the two ends of a kpt-style pipe (fnr source DIR | fnr eval - … | fnr sink OUT)
  const fast = await importBundle('../dist/bundles/pipe/fast-source-sink.bundle.mjs', '../dist/cli/fast-source-sink.js')
  process.exitCode = await (args[0] === 'source' ? fast.runSourceFast : fast.runSinkFast)(args.slice(1))
} else {
  // oclif asks the user database for the login shell when $SHELL is unset (os.userInfo), which
  // throws for a uid without a passwd entry: Porch's Deployment runs the image as 10001, and
  // Kubernetes sets no $SHELL. oclif only uses it for completion hints (processes fnr starts see
  // SHELL=sh, a value every POSIX system has).
  setShellWhenUnknown()
  const {execute} = await import('@oclif/core')
  await execute({dir: import.meta.url})
}

/**
 * The fast path's ES module bundle (scripts/bundles.mjs, made by npm run build), else the plain
 * module (e.g. after a bare tsc). FNR_NO_BUNDLE loads the plain module (to compare the two).
 */
async function importBundle(bundle, plain) {
  if (process.env.FNR_NO_BUNDLE) return import(plain)
  return import(bundle).catch((err) => {
    if (err?.code !== 'ERR_MODULE_NOT_FOUND' || !String(err.message).includes(bundle.replace('../', ''))) throw err
    return import(plain)
  })
}

function setShellWhenUnknown() {
  if (!process.env.SHELL) {
    try {
      process.getBuiltinModule('node:os').userInfo()
    } catch {
      process.env.SHELL = 'sh'
    }
  }
}

/**
 * Re-runs this process with SERVER_FLAGS when some are missing and this Node can: process.execve
 * (Node 22.15 and later) and --disable-sigusr1 (22.14). Returns when nothing is to be done or the
 * re-run cannot happen (then the SIGUSR1 listener and reclaim.ts's run-time flag stand in).
 */
function relaunchWithServerFlags() {
  const SERVER_FLAGS = ['--expose-gc', '--disable-sigusr1']
  const has = (flag) => process.execArgv.some((a) => a === flag || a === flag.replaceAll('-', '_').replace(/^__/, '--'))
  const missing = SERVER_FLAGS.filter((f) => !has(f))
  if (missing.length === 0 || typeof process.execve !== 'function' || !missing.every((f) => process.allowedNodeEnvironmentFlags.has(f))) return
  try {
    process.execve(process.execPath, [process.execPath, ...missing, ...process.execArgv, process.argv[1], ...args], {...process.env})
  } catch {
    // Not here (a worker thread, a platform without execve): run on without the flags.
  }
}
