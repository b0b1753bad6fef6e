// Bundles the part of @kubernetes/client-node fnr uses (dist/lib/k8s/client-node-api.js: a few
// classes and functions) into dist/lib/k8s/client-node.bundle.mjs, tree-shaken, white space and
// syntax minified (names kept, so stack traces stay readable). The package's index imports every
// API group and model of Kubernetes; V8 keeps their sources (6 MB for one module alone), so loading
// it costs ~70 MB of RSS and ~0.8 s, the bundle ~20 MB and ~0.45 s. src/lib/k8s/client.ts loads
// the bundle when it exists (FNR_CLIENT_NODE=package: the package instead).
import path from 'node:path'

import {build} from 'esbuild'

import {ROOT} from './setup.mjs'

const DIR = path.join(ROOT, 'dist', 'lib', 'k8s')

await build({
  entryPoints: [path.join(DIR, 'client-node-api.js')],
  outfile: path.join(DIR, 'client-node.bundle.mjs'),
  bundle: true,
  platform: 'node',
  target: 'node22',
  format: 'esm',
  treeShaking: true,
  minifyWhitespace: true,
  minifySyntax: true,
  legalComments: 'eof',
  logLevel: 'warning',
  // CommonJS dependencies bundled into ESM need a require().
  banner: {js: "import {createRequire as fnrCreateRequire} from 'node:module'; const require = fnrCreateRequire(import.meta.url);"},
})
