#!/usr/bin/env node
// `fnr eval …` is on users' hot paths (kpt pipelines, CI loops): it skips loading oclif (~80 ms)
// and parses its flags with the same specs the oclif command uses. Everything else, including
// `fnr eval --help`, goes through oclif (as does everything when FNR_NO_FAST_PATH is set).
const args = process.argv.slice(2)
const beforeDash = args.indexOf('--') >= 0 ? args.slice(0, args.indexOf('--')) : args
// --runner needs the gRPC client, which only the oclif command loads.
if (args[0] === 'eval' && !process.env.FNR_NO_FAST_PATH && !beforeDash.some((a) => a === '--help' || a === '-h' || a === '--runner' || a.startsWith('--runner='))) {
  // Fastest first (npm run build makes all three): the CommonJS bundle compiled with its V8 code
  // cache, the ES module bundle, the plain module (e.g. after a bare tsc).
  const {runEvalFast} =
    loadCachedBundle() ??
    (await import('../dist/bundles/eval/fast-eval.bundle.mjs').catch((err) => {
      if (err?.code !== 'ERR_MODULE_NOT_FOUND') throw err
      return import('../dist/cli/fast-eval.js')
    }))
  process.exitCode = await runEvalFast(args.slice(1))
} else {
  // oclif asks the user database for the login shell when $SHELL is unset (os.userInfo), which
  // throws for a uid without a passwd entry: Porch's Deployment runs the image as 10001, and
  // Kubernetes sets no $SHELL. oclif only uses it for completion hints (processes fnr starts see
  // SHELL=sh, a value every POSIX system has).
  if (!process.env.SHELL) {
    try {
      process.getBuiltinModule('node:os').userInfo()
    } catch {
      process.env.SHELL = 'sh'
    }
  }
  const {execute} = await import('@oclif/core')
  await execute({dir: import.meta.url})
}

/**
 * dist/bundles/eval/fast-eval.bundle.cjs (scripts/bundle-eval.mjs), run as CommonJS through vm.Script
 * with the code cache made for it, so V8 skips parsing and compiling it. The cache is used only
 * when its build id matches the bundle's last line; V8 rejects it by itself when the Node version
 * or V8 flags differ. Undefined when there is no bundle.
 */
function loadCachedBundle() {
  const fs = process.getBuiltinModule('node:fs')
  const {fileURLToPath} = process.getBuiltinModule('node:url')
  const file = fileURLToPath(new URL('../dist/bundles/eval/fast-eval.bundle.cjs', import.meta.url))
  let source
  try {
    source = fs.readFileSync(file, 'utf8')
  } catch (err) {
    if (err?.code === 'ENOENT') return undefined
    throw err
  }
  const buildId = /\/\/# fnrBuildId=([0-9a-f]+)\s*$/.exec(source.slice(-64))?.[1]
  let cachedData
  if (buildId) {
    try {
      const cache = fs.readFileSync(`${file}.cache`)
      const head = Buffer.from(`${buildId}\n`, 'latin1')
      if (cache.subarray(0, head.length).equals(head)) cachedData = cache.subarray(head.length)
    } catch {
      // No cache: compile as usual.
    }
  }
  const vm = process.getBuiltinModule('node:vm')
  const {createRequire} = process.getBuiltinModule('node:module')
  const path = process.getBuiltinModule('node:path')
  // On the bundle's first line, so line numbers in stack traces stay those of the file.
  const script = new vm.Script(`(function (exports, require, module, __filename, __dirname) {${source}\n})`, {filename: file, cachedData})
  const module = {exports: {}}
  script.runInThisContext()(module.exports, createRequire(file), module, file, path.dirname(file))
  // Build only (scripts/bundle-eval.mjs): write the cache after a sample run, with the functions it ran.
  const out = process.env.FNR_EVAL_CODE_CACHE_OUT
  if (out && buildId) {
    process.once('exit', () => fs.writeFileSync(out, Buffer.concat([Buffer.from(`${buildId}\n`, 'latin1'), script.createCachedData()])))
  }
  return module.exports
}
