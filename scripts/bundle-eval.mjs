// Bundles the `fnr eval` fast path (dist/cli/fast-eval.js and everything it imports) into one ES
// module, dist/bundles/eval/fast-eval.bundle.mjs, which bin/run.js imports: one file instead of a
// hundred modules saved ~40 ms per `fnr eval`. Parsing and compiling it again on every run is left
// to Node's compile cache (module.enableCompileCache, which bin/run.js turns on; it replaced a
// V8 code cache this script used to make for a CommonJS copy of the bundle).
// The bundle sits two folders under dist/, as deep as the modules of dist/lib/<area>/, so paths
// those modules compute from import.meta.url (the shipped functions) stay right.
// test/lib/lazy-loading.test.ts checks what it leaves out.
import {rmSync} from 'node:fs'
import path from 'node:path'

import {build} from 'esbuild'

import {ROOT} from './setup.mjs'

const ENTRY = path.join(ROOT, 'dist', 'cli', 'fast-eval.js')
const OUT_DIR = path.join(ROOT, 'dist', 'bundles', 'eval')

await build({
  entryPoints: [ENTRY],
  bundle: true,
  platform: 'node',
  target: 'node22',
  logLevel: 'warning',
  outfile: path.join(OUT_DIR, 'fast-eval.bundle.mjs'),
  format: 'esm',
  // CommonJS dependencies bundled into ESM need a require().
  banner: {js: "import {createRequire as fnrCreateRequire} from 'node:module'; const require = fnrCreateRequire(import.meta.url);"},
})
// The CommonJS copy and its code cache of earlier builds.
for (const old of ['fast-eval.bundle.cjs', 'fast-eval.bundle.cjs.cache']) rmSync(path.join(OUT_DIR, old), {force: true})
