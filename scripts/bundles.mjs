// Bundles the commands that start without oclif (bin/run.js) into ES modules, so that a start
// loads a few files instead of hundreds (module resolution, reads and compiles were most of a
// start; docs/performance.md):
//
//   fnr eval   dist/cli/fast-eval.js  → dist/bundles/eval/fast-eval.bundle.mjs   (one file)
//   fnr render dist/cli/fast-render.js → dist/bundles/render/fast-render.bundle.mjs (one file)
//   fnr source and fnr sink dist/cli/fast-source-sink.js → dist/bundles/pipe/fast-source-sink.bundle.mjs (one file)
//   fnr serve  dist/cli/fast-serve.js → dist/bundles/serve/fast-serve.bundle.mjs (+ chunks for
//              what a start does not load: the pod runtime, FunctionConfig watches, the response
//              cache… stay lazy as dynamic imports)
//
// Each module keeps the location it had: `import.meta.url` in fnr's modules and `__dirname` /
// `__filename` in CommonJS packages are rewritten to the module's original path, relative to the
// bundle (so dist/ can move, as in an install or an image). Paths computed from them (the proto
// file, the spawner helper) stay right.
// @kubernetes/client-node stays out: src/lib/k8s/client.ts loads its own bundle
// (scripts/bundle-client-node.mjs). Parsing and compiling a bundle again on every run is left to
// Node's compile cache (module.enableCompileCache, which bin/run.js turns on).
// test/lib/lazy-loading.test.ts checks what the bundles leave out.
import {readFile, rm} from 'node:fs/promises'
import {createRequire, isBuiltin} from 'node:module'
import path from 'node:path'

import {build} from 'esbuild'

import {ROOT} from './setup.mjs'

const BUNDLES = [
  {entry: path.join(ROOT, 'dist', 'cli', 'fast-eval.js'), outdir: path.join(ROOT, 'dist', 'bundles', 'eval'), name: 'fast-eval.bundle', splitting: false},
  {entry: path.join(ROOT, 'dist', 'cli', 'fast-render.js'), outdir: path.join(ROOT, 'dist', 'bundles', 'render'), name: 'fast-render.bundle', splitting: false},
  {entry: path.join(ROOT, 'dist', 'cli', 'fast-source-sink.js'), outdir: path.join(ROOT, 'dist', 'bundles', 'pipe'), name: 'fast-source-sink.bundle', splitting: false},
  {entry: path.join(ROOT, 'dist', 'cli', 'fast-serve.js'), outdir: path.join(ROOT, 'dist', 'bundles', 'serve'), name: 'fast-serve.bundle', splitting: true, lazyBuiltins: true},
]

/** The bundle's own URL, for the rewritten module locations (a top-level constant of every output file). */
const BUNDLE_URL = '__fnrBundleUrl'

/**
 * Left out of the bundles, required from node_modules when used: @kubernetes/client-node (its own
 * bundle, above); @grpc/proto-loader (and protobufjs under it), which grpc-js requires only to
 * serve channelz or read ORCA load reports, neither of which fnr uses: fnr's messages are coded
 * without it (src/lib/grpc/wire.ts), and in the bundle it was 0.4 MB a start compiled for nothing.
 */
const EXTERNAL = ['@kubernetes/client-node', '@grpc/proto-loader']

/**
 * A package imported lazily (`await import('yaml')`, or a package's own `import('./x.js')`) is its
 * own chunk, loaded when that line runs. When the module is CommonJS, esbuild's chunk for it
 * exports only `default`, so `const {parse} = await import('yaml')` read undefined (Node itself
 * gives the named exports too). Such an import goes through a small module that names every export
 * the module has (read here, from the installed module), as Node's own import of it does. fnr's
 * own modules are ES modules and are imported as they are.
 */
function namedLazyImports() {
  const requireHere = createRequire(import.meta.url)
  return {
    name: 'named-lazy-imports',
    setup(b) {
      b.onResolve({filter: /.*/}, async (args) => {
        if (args.kind !== 'dynamic-import' || args.namespace !== 'file' || isBuiltin(args.path) || EXTERNAL.includes(args.path)) return undefined
        const bare = !args.path.startsWith('.') && !args.path.startsWith('/')
        if (!bare && !args.importer.includes(`${path.sep}node_modules${path.sep}`)) return undefined
        const resolved = await b.resolve(args.path, {kind: 'import-statement', resolveDir: args.resolveDir, importer: args.importer})
        if (resolved.errors.length > 0 || resolved.external) return undefined
        // an ES module (a package's "import" build) needs nothing
        if (/^\s*(import|export)\s+[\w*{]/m.test(await readFile(resolved.path, 'utf8'))) return undefined
        return {path: resolved.path, namespace: 'lazy-module'}
      })
      b.onLoad({filter: /.*/, namespace: 'lazy-module'}, (args) => {
        const names = Object.keys(requireHere(args.path)).filter((k) => k !== 'default' && /^[A-Za-z_$][\w$]*$/.test(k))
        const from = JSON.stringify(args.path)
        return {contents: `import * as ns from ${from};\nexport const {${names.join(', ')}} = ns;\nexport default ns.default;\n`, resolveDir: path.dirname(args.path), loader: 'js'}
      })
    },
  }
}

/**
 * Node's built-in modules through require(), not import: an ES import of a built-in builds its ES
 * module facade, which reads every export, lazy ones included. On Node 26 that made
 * `import http from 'node:http'` load undici (its WebSocket and fetch classes): 265-464 ms of a
 * start at load 6, against 11-32 ms for require('node:http'); node:fs loaded its streams likewise.
 * esbuild's CommonJS interop reads a property only when the code does.
 *
 * `lazy` (the serve bundle): a built-in in LAZY_BUILTINS that a CommonJS package requires at its top
 * but a start does not use is loaded on first use instead: require() gives a stand-in that loads
 * the module when anything touches it (lazyBuiltinSource). zlib is one: grpc-js requires it at
 * load for the compression a call may ask for, and loading it (with node:internal/zip on Node 26)
 * took ~35 ms of a start at load 5 (docs/performance.md "bench S"). tls, http and assert would
 * gain nothing: node:http2, which the listener needs, loads them. fnr's own ES imports keep the
 * module itself (esbuild's interop lists its exports).
 */
function builtinsThroughRequire(lazy = false) {
  return {
    name: 'builtins-through-require',
    setup(b) {
      b.onResolve({filter: /^[a-z_:/0-9]+$/}, (args) => {
        // (a lazy `await import('node:fs/promises')` stays an import: Node gives it the named exports)
        if (!isBuiltin(args.path) || args.kind === 'dynamic-import' || args.namespace === 'builtin' || args.namespace === 'lazy-builtin') return undefined
        const bare = args.path.replace(/^node:/, '')
        if (lazy && args.kind === 'require-call' && LAZY_BUILTINS.has(bare) && args.importer.includes(`${path.sep}node_modules${path.sep}`)) return {path: bare, namespace: 'lazy-builtin'}
        return {path: args.path, namespace: 'builtin'}
      })
      b.onLoad({filter: /.*/, namespace: 'builtin'}, (args) => ({contents: `module.exports = require(${JSON.stringify(args.path)})`, loader: 'js'}))
      b.onLoad({filter: /.*/, namespace: 'lazy-builtin'}, (args) => ({contents: lazyBuiltinSource(args.path), loader: 'js'}))
    },
  }
}

/** Built-ins that CommonJS packages on the serve path require at load time but a start does not use. */
const LAZY_BUILTINS = new Set(['zlib'])

/**
 * The stand-in for a built-in loaded on first use: a Proxy that loads the module on any access
 * and forwards every operation to it (a property, a call of the module itself as for assert,
 * `in`, its keys, its property descriptors). A non-configurable property is copied onto the
 * Proxy's target before it is reported, as the Proxy rules require.
 */
function lazyBuiltinSource(name) {
  const callable = typeof createRequire(import.meta.url)(name) === 'function'
  return `let real;
const load = () => (real ??= require(${JSON.stringify(name)}));
module.exports = new Proxy(${callable ? '() => {}' : '{}'}, {
  get: (t, k) => Reflect.get(load(), k),
  set: (t, k, v) => Reflect.set(load(), k, v),
  has: (t, k) => Reflect.has(load(), k),
  ownKeys: () => Reflect.ownKeys(load()),
  getOwnPropertyDescriptor: (t, k) => {
    const d = Reflect.getOwnPropertyDescriptor(load(), k);
    if (d && !d.configurable) Reflect.defineProperty(t, k, d);
    return d;
  },
  defineProperty: (t, k, d) => Reflect.defineProperty(load(), k, d),
  deleteProperty: (t, k) => Reflect.deleteProperty(load(), k),
  getPrototypeOf: () => Reflect.getPrototypeOf(load()),
  apply: (t, self, args) => Reflect.apply(load(), self, args),
});
`
}

/** Rewrites import.meta.url, __dirname and __filename to the module's original location. */
function keepModuleLocations(outdir) {
  return {
    name: 'keep-module-locations',
    setup(b) {
      b.onLoad({filter: /\.(c|m)?js$/}, async (args) => {
        let text = await readFile(args.path, 'utf8')
        const usesMeta = text.includes('import.meta.url')
        const usesDir = /\b__(dirname|filename)\b/.test(text)
        if (!usesMeta && !usesDir) return undefined
        const rel = JSON.stringify(path.relative(outdir, args.path).split(path.sep).join('/'))
        const original = `new URL(${rel}, ${BUNDLE_URL})`
        if (usesMeta) text = text.replaceAll('import.meta.url', `${original}.href`)
        if (usesDir) {
          const file = `require('node:url').fileURLToPath(${original})`
          text = `var __filename = ${file}, __dirname = require('node:path').dirname(__filename);\n${text}`
        }
        return {contents: text, loader: 'js', resolveDir: path.dirname(args.path)}
      })
    },
  }
}

for (const {entry, outdir, name, splitting, lazyBuiltins = false} of BUNDLES) {
  await rm(outdir, {recursive: true, force: true})
  const {metafile} = await build({
    metafile: true,
    entryPoints: {[name]: entry},
    bundle: true,
    splitting,
    platform: 'node',
    target: 'node22',
    format: 'esm',
    outdir,
    outExtension: {'.js': '.mjs'},
    // chunks beside the entry: every output file is as deep, so the rewritten locations hold in each
    chunkNames: '[name]-[hash]',
    external: EXTERNAL,
    logLevel: 'warning',
    plugins: [builtinsThroughRequire(lazyBuiltins), namedLazyImports(), keepModuleLocations(outdir)],
    // CommonJS dependencies bundled into ESM need a require().
    banner: {js: `import {createRequire as fnrCreateRequire} from 'node:module'; const require = fnrCreateRequire(import.meta.url); const ${BUNDLE_URL} = import.meta.url;`},
  })
  // What the lazy imports above guard against, for any other way in: a CommonJS module imported
  // lazily would come back with its default export only.
  const lazyCjs = Object.entries(metafile.inputs).flatMap(([from, input]) =>
    input.imports.filter((i) => i.kind === 'dynamic-import' && !i.external && metafile.inputs[i.path]?.format === 'cjs').map((i) => `${from} → ${i.path}`),
  )
  if (lazyCjs.length > 0) throw new Error(`bundles: CommonJS modules imported lazily would lose their named exports: ${lazyCjs.join(', ')}`)
}
