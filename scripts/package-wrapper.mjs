#!/usr/bin/env node
// Builds the self-contained wrapper-server folder that function pods run from
// /wrapper-server-tools (the init container copies it into an emptyDir): a Node single-executable
// application carrying its own ELF interpreter and shared libraries, so it runs in any x86-64
// Linux image, with or without a libc of its own (distroless/static, alpine/musl, scratch).
//
//   node scripts/package-wrapper.mjs [--force] [--out DIR] [--node PATH] [--quiet]
//
// Output (default build/wrapper-server/; layout documented in docker/README.md):
//   wrapper-server            the entry Porch's pod templates run: docker/wrapper-launcher.sh, a
//                             script for the static busybox below. As PID 1 of the pod it runs the
//                             SEA as its child, reaps every zombie, forwards signals and exits with
//                             the SEA's status; otherwise it execs the SEA
//   wrapper-server-sea        the SEA: PT_INTERP = /wrapper-server-tools/lib/ld-linux-x86-64.so.2,
//                             DT_RPATH = $ORIGIN/lib:/wrapper-server-tools/lib
//   busybox                   Debian's busybox-static (no libc needed), the launcher's shell
//   fnr-spawn                 the native spawn helper (native/fnr-spawn.c), linked statically so it
//                             runs in any image; the SEA starts functions through it
//                             (docs/process.md "The native spawn helper"). Left out, said once,
//                             where no C compiler exists: the SEA then uses the Node spawner
//   grpc-health-probe         symlink to wrapper-server-sea (it probes when run under that name)
//   lib/                      the interpreter and every library `ldd` lists for the node binary
//   licenses/                 copyright files of the carried binaries and the bundle's notices
//   build-info.json           versions, sizes, sha256s and the inputs' fingerprint
//
// Steps: esbuild bundles src/bin/wrapper-server.ts into one CommonJS file, with its version in a
// banner variable (__FNR_EMBEDDED__); the protocol's messages are coded in the code
// (src/lib/grpc/proto.ts, health.ts), so no .proto file is read at run time. `node --experimental-sea-config` makes the
// blob; a stripped copy of the same node binary gets it with postject; patchelf then points the
// interpreter and the library path into the folder.
//
// Re-running is cheap: the build is skipped when no input changed (the bundle's own input files
// from esbuild's metafile, this script, package-lock.json and the node binary, by size and
// mtime). Concurrent runs serialise on a lock; the folder is replaced atomically.
//
// Needs: npm ci (esbuild, postject), patchelf, ldd (libc-bin) and a static busybox (Debian package
// busybox-static); strip (binutils) is used when present. Nothing is downloaded.
import {spawnSync} from 'node:child_process'
import {createHash} from 'node:crypto'
import {
  chmodSync,
  copyFileSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import path from 'node:path'
import {fileURLToPath, pathToFileURL} from 'node:url'

import {SOURCE as NATIVE_HELPER_SOURCE, buildNative} from './build-native.mjs'

export const ROOT = fileURLToPath(new URL('..', import.meta.url))
export const DEFAULT_OUT = path.join(ROOT, 'build', 'wrapper-server')
/** Where function pods mount the folder (Porch's inline pod template; src/lib/pods/model/template.ts). */
export const MOUNT_POINT = '/wrapper-server-tools'
const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2'
/** The Node single-executable application in the folder; `wrapper-server` is the launcher that runs it. */
export const SEA_NAME = 'wrapper-server-sea'
/** The launcher, installed as `wrapper-server` (docs/process.md "How zombies are reaped"). */
const LAUNCHER = path.join(ROOT, 'docker', 'wrapper-launcher.sh')
/** Where Debian's busybox-static installs its binary. */
const BUSYBOX_CANDIDATES = ['/bin/busybox', '/usr/bin/busybox']
const ENTRY = path.join(ROOT, 'src', 'bin', 'wrapper-server.ts')
/** Bumped when the layout or the steps change, so old folders are rebuilt. */
const RECIPE_VERSION = 9
/** Node flags built into the executable (the SEA config's execArgv). */
export const SEA_EXEC_ARGV = ['--expose-gc', '--disable-sigusr1']
/**
 * Environment variables node reads at startup, before any JavaScript runs, that a function image
 * may set for its own Node programs (NODE_OPTIONS=--require … would otherwise load into, or
 * crash, the wrapper). The copy of node in the folder looks them up under other names of the
 * same length; the function still gets the originals, since the wrapper passes its environment on.
 * Node 26's binary has no NODE_OPTIONS C string to rename (the name is built in code): there the
 * SEA's execArgvExtension "none" keeps NODE_OPTIONS out, and no variable passes node flags.
 */
export const RENAMED_NODE_ENV = [
  ['NODE_OPTIONS', 'FNRW_OPTIONS'],
  ['NODE_ICU_DATA', 'FNRW_ICU_DATA'],
]

function log(quiet, msg) {
  if (!quiet) process.stderr.write(`package-wrapper: ${msg}\n`)
}

function run(cmd, args, options = {}) {
  const r = spawnSync(cmd, args, {encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, ...options})
  if (r.error) throw new Error(`${cmd} could not be run: ${r.error.message}`)
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (exit ${r.status}):\n${(r.stdout ?? '') + (r.stderr ?? '')}`.trim())
  return r.stdout ?? ''
}

function have(cmd) {
  return spawnSync(cmd, ['--version'], {stdio: 'ignore'}).error === undefined
}

function sha256(file) {
  return createHash('sha256').update(readFileSync(file)).digest('hex')
}

function walk(dir, out = []) {
  if (!existsSync(dir)) return out
  for (const e of readdirSync(dir, {withFileTypes: true})) {
    const p = path.join(dir, e.name)
    if (e.isDirectory()) walk(p, out)
    else out.push(p)
  }
  return out
}

function dirSize(dir) {
  return walk(dir).reduce((n, f) => n + lstatSync(f).size, 0)
}

/** A fingerprint of the inputs: paths, sizes and mtimes (a missing file counts as a change). */
function fingerprint(files, nodeBinary) {
  const h = createHash('sha256')
  h.update(`recipe ${RECIPE_VERSION}\nnode ${nodeBinary}\n`)
  const all = [...new Set([...files, realpathSync(nodeBinary), ...BUSYBOX_CANDIDATES])].sort()
  for (const f of all) {
    try {
      const s = statSync(f)
      h.update(`${f}\0${s.size}\0${s.mtimeMs}\n`)
    } catch {
      h.update(`${f}\0missing\n`)
    }
  }
  return h.digest('hex')
}

function staticInputs() {
  return [
    fileURLToPath(import.meta.url),
    path.join(ROOT, 'package-lock.json'),
    LAUNCHER,
    NATIVE_HELPER_SOURCE,
    path.join(ROOT, 'scripts', 'build-native.mjs'),
    ...walk(path.join(ROOT, 'scripts', 'wrapper')),
  ]
}

function readBuildInfo(out) {
  try {
    return JSON.parse(readFileSync(path.join(out, 'build-info.json'), 'utf8'))
  } catch {
    return undefined
  }
}

/** True when `out` holds a complete build of the current inputs. */
export function isUpToDate(out = DEFAULT_OUT, nodeBinary = process.execPath) {
  const info = readBuildInfo(out)
  if (!info?.inputs || !existsSync(path.join(out, 'wrapper-server')) || !existsSync(path.join(out, SEA_NAME))) return false
  return info.fingerprint === fingerprint([...info.inputs.map((f) => path.join(ROOT, f)), ...staticInputs()], nodeBinary)
}

// ---------------------------------------------------------------------------------------------
// Locking: one build at a time per output folder (other engineers' test runs may race us).

function pidAlive(pid) {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return e.code === 'EPERM'
  }
}

async function withLock(out, quiet, fn) {
  const lock = `${out}.lock`
  mkdirSync(path.dirname(out), {recursive: true})
  const started = Date.now()
  for (;;) {
    try {
      mkdirSync(lock)
      writeFileSync(path.join(lock, 'pid'), String(process.pid))
      break
    } catch (e) {
      if (e.code !== 'EEXIST') throw e
      let owner = 0
      try {
        owner = Number(readFileSync(path.join(lock, 'pid'), 'utf8'))
      } catch {
        // Being created right now, or left half-made by a killed run: judged by age below.
      }
      const age = Date.now() - (existsSync(lock) ? statSync(lock).mtimeMs : Date.now())
      if ((owner > 0 && !pidAlive(owner)) || (owner === 0 && age > 10_000)) {
        log(quiet, `removing a stale lock (${owner ? `pid ${owner} is gone` : 'no owner'})`)
        rmSync(lock, {recursive: true, force: true})
        continue
      }
      if (Date.now() - started > 15 * 60_000) throw new Error(`timed out waiting for the build lock ${lock} (held by pid ${owner})`, {cause: e})
      if (Date.now() - started < 200) log(quiet, `waiting for another build (pid ${owner})`)
      await new Promise((r) => setTimeout(r, 250))
    }
  }
  try {
    return await fn()
  } finally {
    rmSync(lock, {recursive: true, force: true})
  }
}

// ---------------------------------------------------------------------------------------------
// Steps

async function bundle(work, quiet) {
  const esbuild = await import('esbuild')
  const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8'))
  const embedded = {version: pkg.version, builtFrom: 'single executable'}
  const outfile = path.join(work, 'wrapper-server.cjs')
  const result = await esbuild.build({
    entryPoints: [ENTRY],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node22',
    minify: true,
    legalComments: 'external',
    metafile: true,
    logLevel: 'silent',
    // import.meta is empty in CommonJS; proto.ts computes a (here unused) path from it at load.
    define: {'import.meta.url': '__fnr_import_meta_url'},
    banner: {
      js: `var __fnr_import_meta_url=require("url").pathToFileURL(__filename).href;var __FNR_EMBEDDED__=${JSON.stringify(embedded)};`,
    },
  })
  const warnings = result.warnings.filter((w) => !/Using direct eval|"eval"/.test(w.text))
  for (const w of warnings) log(quiet, `esbuild warning: ${w.text}${w.location ? ` (${w.location.file}:${w.location.line})` : ''}`)
  const inputs = Object.keys(result.metafile.inputs)
    .filter((f) => !f.includes(':'))
    .map((f) => path.relative(ROOT, path.resolve(ROOT, f)))
  return {outfile, inputs, legal: `${outfile.replace(/\.cjs$/, '')}.cjs.LEGAL.txt`, bytes: statSync(outfile).size}
}

/** The static busybox for the launcher: Debian's busybox-static (a dynamic busybox would need a libc in the image). */
function staticBusybox() {
  for (const p of BUSYBOX_CANDIDATES) {
    if (!existsSync(p)) continue
    const r = spawnSync('ldd', [p], {encoding: 'utf8'})
    if (/not a dynamic executable|statically linked/.test(`${r.stdout}${r.stderr}`)) return p
  }
  throw new Error(`a static busybox is required for the launcher (Debian package busybox-static; looked at ${BUSYBOX_CANDIDATES.join(', ')})`)
}

/** The interpreter and libraries of a dynamically linked binary, as ldd resolves them here. */
export function sharedLibraries(binary) {
  const text = run('ldd', [binary])
  const libs = []
  let interpreter
  for (const line of text.split('\n')) {
    const arrow = /^\s*(\S+)\s+=>\s+(\/\S+)\s+\(0x/.exec(line)
    if (arrow) {
      libs.push({soname: arrow[1], file: arrow[2]})
      continue
    }
    const bare = /^\s*(\/\S+)\s+\(0x/.exec(line)
    if (bare) interpreter = {soname: path.basename(bare[1]), file: bare[1]}
    if (/not found/.test(line)) throw new Error(`ldd ${binary}: ${line.trim()}`)
  }
  if (!interpreter) throw new Error(`ldd ${binary} lists no ELF interpreter; is it dynamically linked?\n${text}`)
  return {interpreter, libs}
}

function copyLicenses(files, legal, licensesDir, nodeBinary) {
  mkdirSync(licensesDir, {recursive: true})
  const copied = []
  const packages = new Set()
  for (const f of files) {
    // dpkg knows the path the package installed (/lib/… on merged-/usr systems), so try both.
    for (const candidate of new Set([f, realpathSync(f)])) {
      const r = spawnSync('dpkg', ['-S', candidate], {encoding: 'utf8'})
      if (r.status === 0) {
        packages.add(r.stdout.split(':')[0])
        break
      }
    }
  }
  for (const pkgName of packages) {
    const copyright = `/usr/share/doc/${pkgName}/copyright`
    if (existsSync(copyright)) {
      copyFileSync(copyright, path.join(licensesDir, `${pkgName}.copyright`))
      copied.push(`${pkgName}.copyright`)
    }
  }
  // Node's own licence (the SEA is a node binary): the Debian/nodesource doc dir, or where a
  // nodejs.org tarball unpacked into a prefix (the official node images) leaves it.
  const prefix = path.dirname(path.dirname(realpathSync(nodeBinary)))
  for (const candidate of ['/usr/share/doc/nodejs/LICENSE', path.join(prefix, 'share', 'doc', 'node', 'LICENSE'), path.join(prefix, 'LICENSE')]) {
    if (existsSync(candidate)) {
      copyFileSync(candidate, path.join(licensesDir, 'node.LICENSE'))
      copied.push('node.LICENSE')
      break
    }
  }
  if (existsSync(legal)) {
    copyFileSync(legal, path.join(licensesDir, 'bundled-npm-packages.txt'))
    copied.push('bundled-npm-packages.txt')
  }
  return copied
}

/**
 * Renames the startup environment variables of RENAMED_NODE_ENV in a node binary. Each name is a
 * NUL-delimited C string that node passes to getenv; the same names also occur inside V8's
 * serialized built-in code (JavaScript such as child_process reading process.env.NODE_OPTIONS),
 * where a 4-byte length precedes them, and those are left alone. Returns the names renamed; a name
 * not found exactly once is left as it is (and reported in build-info.json).
 */
function renameNodeEnv(exe, quiet) {
  const bytes = readFileSync(exe)
  const renamed = []
  for (const [from, to] of RENAMED_NODE_ENV) {
    if (from.length !== to.length) throw new Error(`${from} and ${to} differ in length`)
    const needle = Buffer.from(`\0${from}\0`)
    const hits = []
    for (let i = bytes.indexOf(needle); i >= 0; i = bytes.indexOf(needle, i + 1)) {
      const start = i + 1
      if (start >= 4 && bytes.readUInt32LE(start - 4) === from.length) continue // a V8 serialized string
      hits.push(start)
    }
    if (hits.length !== 1) {
      log(quiet, `warning: ${from} appears ${hits.length} times as a C string in ${exe}; not renamed, so the wrapper will honour it`)
      continue
    }
    bytes.write(to, hits[0], 'latin1')
    renamed.push(`${from}=>${to}`)
  }
  writeFileSync(exe, bytes)
  return renamed
}

async function build({out, nodeBinary, quiet}) {
  for (const [cmd, pkg] of [['patchelf', 'patchelf'], ['ldd', 'libc-bin']]) {
    if (!have(cmd)) throw new Error(`${cmd} is required (Debian package ${pkg})`)
  }
  const busybox = staticBusybox()
  const postject = path.join(ROOT, 'node_modules', '.bin', 'postject')
  if (!existsSync(postject)) throw new Error('node_modules/.bin/postject is missing: run npm ci')
  const started = performance.now()
  const work = `${out}.tmp-${process.pid}`
  rmSync(work, {recursive: true, force: true})
  mkdirSync(work, {recursive: true})
  const stage = path.join(work, 'wrapper-server')
  const libDir = path.join(stage, 'lib')
  mkdirSync(libDir, {recursive: true})
  try {
    log(quiet, 'bundling src/bin/wrapper-server.ts (esbuild)')
    const b = await bundle(work, quiet)

    log(quiet, `making the SEA blob with ${nodeBinary} ${run(nodeBinary, ['--version']).trim()}`)
    const seaConfig = path.join(work, 'sea-config.json')
    const blob = path.join(work, 'sea.blob')
    // execArgv: the Node flags the executable starts with (Node 24 and later read them from here;
    // 22 ignores the field, and src/bin/wrapper-server.ts's SIGUSR1 listener stands in).
    // --expose-gc for src/lib/reclaim.ts, --disable-sigusr1: no inspector on SIGUSR1 (docs/process.md
    // "No debugger by signal").
    // execArgvExtension none: NODE_OPTIONS from the environment (a Node function image's) is not
    // the executable's (Node 24 and later; the renaming below covers older ones, and a check
    // after the build makes sure one of the two took).
    writeFileSync(
      seaConfig,
      JSON.stringify({main: b.outfile, output: blob, disableExperimentalSEAWarning: true, useCodeCache: true, execArgv: SEA_EXEC_ARGV, execArgvExtension: 'none'}),
    )
    // The blob's V8 code cache is made under the flags the executable will run with (V8 rejects a
    // cache made under other flags, with a warning on every start): Node 24 and later apply the
    // execArgv above, 22 ignores it.
    const nodeMajor = Number(/^v(\d+)/.exec(run(nodeBinary, ['--version']).trim())?.[1])
    run(nodeBinary, [...(nodeMajor >= 24 ? SEA_EXEC_ARGV : []), '--experimental-sea-config', seaConfig], {cwd: work})

    const exe = path.join(stage, SEA_NAME)
    copyFileSync(realpathSync(nodeBinary), exe)
    chmodSync(exe, 0o755)
    const stripped = have('strip')
    if (stripped) run('strip', ['--strip-all', exe])
    else log(quiet, 'strip (binutils) not found: the executable keeps its symbols and is larger')
    const renamedEnv = renameNodeEnv(exe, quiet)

    log(quiet, 'injecting the blob (postject)')
    run(postject, [exe, 'NODE_SEA_BLOB', blob, '--sentinel-fuse', SEA_FUSE])

    const {interpreter, libs} = sharedLibraries(nodeBinary)
    for (const lib of [interpreter, ...libs]) {
      const dest = path.join(libDir, lib.soname)
      copyFileSync(realpathSync(lib.file), dest)
      chmodSync(dest, 0o755)
      if (stripped) run('strip', ['--strip-unneeded', dest])
    }
    const interp = `${MOUNT_POINT}/lib/${interpreter.soname}`
    // DT_RPATH (not RUNPATH): searched before LD_LIBRARY_PATH, which the function image may set,
    // and used for the libraries' own dependencies too. $ORIGIN first, the mount point second
    // (in case /proc is not mounted and $ORIGIN cannot be resolved).
    const rpath = `$ORIGIN/lib:${MOUNT_POINT}/lib`
    log(quiet, `patchelf: interpreter ${interp}, rpath ${rpath}`)
    run('patchelf', ['--set-interpreter', interp, '--force-rpath', '--set-rpath', rpath, exe])
    chmodSync(exe, 0o555)
    for (const f of readdirSync(libDir)) chmodSync(path.join(libDir, f), f === interpreter.soname ? 0o555 : 0o444)

    // Check it: run it through its own interpreter (the absolute PT_INTERP only exists in a pod).
    const first = spawnSync(path.join(libDir, interpreter.soname), [exe, '--version'], {encoding: 'utf8'})
    const version = (first.stdout ?? '').trim()
    if (first.status !== 0 || !version.startsWith('fnr wrapper-server')) throw new Error(`the packaged executable does not start: ${version}${first.stderr ?? ''}`)
    if (first.stderr) throw new Error(`the packaged executable warns at start-up: ${first.stderr}`)
    const probe = spawnSync(path.join(libDir, interpreter.soname), [exe, '--version'], {env: {NODE_OPTIONS: '--require /nonexistent/fnr-node-options-probe.js'}, encoding: 'utf8'})
    if (probe.status !== 0) {
      throw new Error(`the packaged executable honours NODE_OPTIONS (neither the SEA's execArgvExtension nor the renaming took with this node): ${probe.stderr}`)
    }

    // The launcher (docs/process.md "How zombies are reaped"): in a function pod the entry is
    // PID 1, orphans of the function are re-parented to it, and Node waits only for its own
    // children. A static busybox shell runs the SEA as its child and reaps them.
    copyFileSync(busybox, path.join(stage, 'busybox'))
    chmodSync(path.join(stage, 'busybox'), 0o555)
    const launcherText = readFileSync(LAUNCHER, 'utf8')
    if (!launcherText.startsWith(`#!${MOUNT_POINT}/busybox sh\n`)) throw new Error(`${LAUNCHER} must start with #!${MOUNT_POINT}/busybox sh`)
    writeFileSync(path.join(stage, 'wrapper-server'), launcherText)
    chmodSync(path.join(stage, 'wrapper-server'), 0o555)
    const busyboxVersion = (run(busybox, ['--help']).split('\n')[0] ?? '').trim()
    symlinkSync(SEA_NAME, path.join(stage, 'grpc-health-probe'))
    // The native spawn helper, static: the function image may have no libc, or another one.
    const helper = buildNative({out: path.join(stage, 'fnr-spawn'), staticLink: true, quiet})
    if (helper) chmodSync(helper, 0o555)
    const licenses = copyLicenses([nodeBinary, interpreter.file, ...libs.map((l) => l.file), busybox], b.legal, path.join(stage, 'licenses'), nodeBinary)

    const files = walk(stage)
      .filter((f) => !lstatSync(f).isSymbolicLink())
      .map((f) => ({path: path.relative(stage, f), bytes: statSync(f).size, sha256: sha256(f)}))
    const info = {
      recipe: RECIPE_VERSION,
      version,
      busybox: busyboxVersion,
      nativeSpawnHelper: helper !== undefined,
      node: run(nodeBinary, ['--version']).trim(),
      nodeBinary: realpathSync(nodeBinary),
      interpreter: interp,
      rpath,
      mountPoint: MOUNT_POINT,
      libraries: [interpreter, ...libs].map((l) => ({soname: l.soname, from: realpathSync(l.file)})),
      bundleBytes: b.bytes,
      stripped,
      renamedEnv,
      licenses,
      totalBytes: dirSize(stage),
      files,
      inputs: b.inputs,
      fingerprint: fingerprint([...b.inputs.map((f) => path.join(ROOT, f)), ...staticInputs()], nodeBinary),
      buildMs: Math.round(performance.now() - started),
    }
    writeFileSync(path.join(stage, 'build-info.json'), `${JSON.stringify(info, null, 2)}\n`)
    chmodSync(path.join(stage, 'build-info.json'), 0o444)

    // Swap in atomically; a container still using the old folder keeps its open files.
    const old = `${out}.old-${process.pid}`
    if (existsSync(out)) renameSync(out, old)
    renameSync(stage, out)
    rmSync(old, {recursive: true, force: true})
    return info
  } finally {
    rmSync(work, {recursive: true, force: true})
  }
}

/**
 * Builds the folder unless it is up to date. Resolves with {dir, rebuilt, info}.
 * Options: out (default build/wrapper-server), nodeBinary (default this node), force, quiet.
 */
export async function ensureWrapperPackage(options = {}) {
  const out = path.resolve(options.out ?? DEFAULT_OUT)
  const nodeBinary = options.nodeBinary ?? process.execPath
  const quiet = options.quiet ?? false
  if (!options.force && isUpToDate(out, nodeBinary)) return {dir: out, rebuilt: false, info: readBuildInfo(out)}
  return withLock(out, quiet, async () => {
    // Someone else may have built it while we waited.
    if (!options.force && isUpToDate(out, nodeBinary)) return {dir: out, rebuilt: false, info: readBuildInfo(out)}
    const info = await build({out, nodeBinary, quiet})
    return {dir: out, rebuilt: true, info}
  })
}

function mib(bytes) {
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`
}

async function main(argv) {
  const options = {}
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--force') options.force = true
    else if (a === '--quiet') options.quiet = true
    else if (a === '--out') options.out = argv[++i]
    else if (a === '--node') options.nodeBinary = argv[++i]
    else if (a === '--help' || a === '-h') {
      process.stdout.write('usage: node scripts/package-wrapper.mjs [--force] [--out DIR] [--node PATH] [--quiet]\n')
      return
    } else throw new Error(`unknown argument ${JSON.stringify(a)} (see --help)`)
  }
  const {dir, rebuilt, info} = await ensureWrapperPackage(options)
  const rel = path.relative(process.cwd(), dir) || '.'
  if (!rebuilt) {
    log(options.quiet, `${rel} is up to date (${mib(info.totalBytes)})`)
    return
  }
  const lines = [
    `built ${rel} in ${(info.buildMs / 1000).toFixed(1)} s: ${mib(info.totalBytes)} (${info.version})`,
    ...info.files.map((f) => `  ${f.path.padEnd(34)} ${mib(f.bytes).padStart(9)}`),
    `  grpc-health-probe -> ${SEA_NAME}`,
  ]
  log(options.quiet, lines.join('\n'))
}

if (process.argv[1] && pathToFileURL(path.resolve(process.argv[1])).href === import.meta.url) {
  main(process.argv.slice(2)).catch((err) => {
    process.stderr.write(`package-wrapper: ${err.message}\n`)
    process.exit(1)
  })
}
