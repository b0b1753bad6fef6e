#!/usr/bin/env node
// `fnr eval …` is on users' hot paths (kpt pipelines, CI loops): it skips loading oclif (~80 ms)
// and parses its flags with the same specs the oclif command uses. Everything else, including
// `fnr eval --help`, goes through oclif (as does everything when FNR_NO_FAST_PATH is set).
const args = process.argv.slice(2)
const beforeDash = args.indexOf('--') >= 0 ? args.slice(0, args.indexOf('--')) : args
if (args[0] === 'eval' && !process.env.FNR_NO_FAST_PATH && !beforeDash.some((a) => a === '--help' || a === '-h')) {
  // The bundle (npm run build) loads fastest; the plain module works too (e.g. after a bare tsc).
  const {runEvalFast} = await import('../dist/lib/cli/fast-eval.bundle.mjs').catch((err) => {
    if (err?.code !== 'ERR_MODULE_NOT_FOUND') throw err
    return import('../dist/lib/cli/fast-eval.js')
  })
  process.exitCode = await runEvalFast(args.slice(1))
} else {
  const {execute} = await import('@oclif/core')
  await execute({dir: import.meta.url})
}
