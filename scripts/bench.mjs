// `npm run bench`: builds if needed and runs the benchmark suite (bench/run.ts).
import {spawnSync} from 'node:child_process'
import path from 'node:path'

import {ROOT, ensureBuilt, ensureNpmDependencies} from './setup.mjs'

ensureNpmDependencies()
ensureBuilt()
const r = spawnSync(process.execPath, ['--import', 'tsx', path.join(ROOT, 'bench', 'run.ts'), ...process.argv.slice(2)], {stdio: 'inherit', cwd: ROOT})
process.exit(r.status ?? 1)
