// `npm run bench`: builds if needed and runs the benchmark suite (bench/run.ts).
//   npm run bench -- --quick          ~1 minute smoke run (FNR_BENCH_QUICK=1)
//   npm run bench -- --only=P1,P4     only these cases (FNR_BENCH_ONLY)
// Other settings are environment variables, listed at the top of bench/run.ts.
import {spawnSync} from 'node:child_process'
import path from 'node:path'

import {ROOT, ensureBuilt, ensureNpmDependencies} from './setup.mjs'

const env = {...process.env}
for (const arg of process.argv.slice(2)) {
  if (arg === '--quick') env.FNR_BENCH_QUICK = '1'
  else if (arg.startsWith('--only=')) env.FNR_BENCH_ONLY = arg.slice('--only='.length)
  else {
    process.stderr.write(`bench: unknown argument ${JSON.stringify(arg)} (expected --quick or --only=P1,P2,…)\n`)
    process.exit(2)
  }
}

ensureNpmDependencies()
ensureBuilt()
const r = spawnSync(process.execPath, ['--import', 'tsx', path.join(ROOT, 'bench', 'run.ts')], {stdio: 'inherit', cwd: ROOT, env})
process.exit(r.status ?? 1)
