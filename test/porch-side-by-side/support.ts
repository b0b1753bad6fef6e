/**
 * A conformance corpus for function runners, sent by the Go client (test/peers/goclient: grpc-go,
 * Porch's generated evaluator client, no deadline, 6 MiB limits, only resource_list read, errors
 * as text), and Porch's own runner (func/server v1.5.8, built from the module proxy) started
 * beside fnr serve on the same config.yaml and functions.
 */
import {spawn, type ChildProcess} from 'node:child_process'
import {once} from 'node:events'
import {copyFile, mkdir, writeFile} from 'node:fs/promises'
import net from 'node:net'
import path from 'node:path'

import * as grpc from '@grpc/grpc-js'
import {execa} from 'execa'
import {stringify} from 'yaml'

import {buildCatalogFunctions, CATALOG} from '../../scripts/catalog-peers.mjs'
import {argsConfigMap, CATALOG_YAML, CORPUS_CONFIGS, corpusPackages, corpusResourceList, readConfig, writePackage} from '../catalog/support.js'
import {EVALUATE_METHOD_PATH} from '../../src/lib/grpc/proto.js'
import type {ServeProcess} from '../support/serve.js'
import {SCRIPTS, writeExecutable} from '../support/tmp.js'

export interface CorpusCase {
  name: string
  image: string
  input: Buffer
}

export interface GoReply {
  name: string
  output: Buffer
  error?: string
}

/** Runs `cases` through the Go client against `addr`, in order. */
export async function goClient(binary: string, addr: string, cases: CorpusCase[], maxSize?: number): Promise<GoReply[]> {
  const input = cases.map((c) => JSON.stringify({name: c.name, image: c.image, input: c.input.toString('base64')})).join('\n') + '\n'
  const r = await execa(binary, ['-addr', addr, ...(maxSize ? ['-max-size', String(maxSize)] : [])], {input, timeout: 600_000, maxBuffer: 512 * 1024 * 1024})
  return String(r.stdout)
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => {
      const d = JSON.parse(l) as {name: string; output?: string; error?: string}
      return {name: d.name, output: Buffer.from(d.output ?? '', 'base64'), error: d.error}
    })
}

/** The gRPC status code in a Go client's error text ("rpc error: code = NotFound desc = …"). */
export const grpcCode = (error: string | undefined): string | undefined => (error ? /rpc error: code = (\w+)/.exec(error)?.[1] : undefined)

export interface RunnerBed {
  functionsDir: string
  configPath: string
}

const SHELL = {
  cat: SCRIPTS.cat,
  stderr: SCRIPTS.stderr,
  'fail-with-results': SCRIPTS.failWithResults,
  'exit-2': '#!/bin/sh\ncat >/dev/null\necho "bad things happened" >&2\nexit 2\n',
  // Its stdio by name, as shell functions use them: Go's os/exec (both of Porch's servers) gives a
  // function pipes, which /dev/stdin, /dev/stdout and /dev/stderr open and `[ -p ]` recognises.
  'dev-stdio': '#!/bin/sh\n[ -p /dev/stdin ] || { echo "stdin is not a pipe" >&2; exit 3; }\necho "reading /dev/stdin" > /dev/stderr\ncat /dev/stdin > /dev/stdout\n',
}

/**
 * A functions dir with the built catalog binaries (Porch's layout) and a few shell functions (plus
 * `extra`: name → script), each shell function mapped to example.com/<name>:v1, and its config.yaml.
 */
export async function runnerBed(dir: string, extra: Record<string, string> = {}): Promise<RunnerBed> {
  const built = buildCatalogFunctions()
  const functionsDir = path.join(dir, 'functions')
  await mkdir(functionsDir, {recursive: true})
  const entries = (await readConfig(CATALOG_YAML)).filter((e) => CATALOG.some((f) => f.name === e.function))
  for (const e of entries) await copyFile(path.join(built, e.function), path.join(functionsDir, e.function)).then(() => execa('chmod', ['755', path.join(functionsDir, e.function)]))
  for (const [name, script] of Object.entries({...SHELL, ...extra})) {
    await writeExecutable(path.join(functionsDir, name), script)
    entries.push({function: name, images: [`example.com/${name}:v1`]})
  }
  const configPath = path.join(dir, 'config.yaml')
  await writeFile(configPath, stringify({functions: entries}))
  return {functionsDir, configPath}
}

/** The conformance corpus: real functions under Porch's names, failures, unknown images, odd input, size limits. */
export async function conformanceCorpus(dir: string): Promise<CorpusCase[]> {
  const porchNames = await readConfig(CATALOG_YAML)
  const cases: CorpusCase[] = []
  const pkgs = corpusPackages(3, 7)
  for (const f of CATALOG) {
    const images = porchNames.find((e) => e.function === f.name)!.images
    for (const [ci, cfg] of CORPUS_CONFIGS[f.name]!.entries()) {
      for (const [pi, pkg] of pkgs.entries()) {
        const d = path.join(dir, f.name, String(ci), pkg.name)
        await writePackage(d, pkg)
        cases.push({name: `${f.name}/${cfg.label}/${pkg.name}`, image: images[(ci + pi) % images.length]!, input: await corpusResourceList(d, cfg.fnConfig ?? argsConfigMap(cfg.args))})
      }
    }
  }
  const small = Buffer.from('apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: cm\n  data:\n    k: v\nfunctionConfig:\n  apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: fn\n  data:\n    namespace: ns1\n')
  const big = Buffer.concat([small, Buffer.from(`  big: "${'x'.repeat(2 * 1024 * 1024)}"\n`)])
  cases.push(
    {name: 'bare name', image: 'set-namespace:v0.4.2', input: small},
    {name: 'json input', image: 'ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.2', input: Buffer.from(JSON.stringify({apiVersion: 'config.kubernetes.io/v1', kind: 'ResourceList', items: [{apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'j'}}], functionConfig: {apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'fn'}, data: {namespace: 'json'}}}))},
    {name: 'not yaml', image: 'ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.2', input: Buffer.from('{{{ not yaml')},
    {name: 'unknown image', image: 'example.com/not-there:v1', input: small},
    {name: 'cat', image: 'example.com/cat:v1', input: small},
    {name: 'stderr and output', image: 'example.com/stderr:v1', input: small},
    {name: 'failure with results', image: 'example.com/fail-with-results:v1', input: small},
    {name: 'exit 2', image: 'example.com/exit-2:v1', input: small},
    {name: 'stdio by name (/dev/stdin)', image: 'example.com/dev-stdio:v1', input: small},
    {name: '2 MiB through cat', image: 'example.com/cat:v1', input: big},
    {name: '7 MiB (over the client limit)', image: 'example.com/cat:v1', input: Buffer.concat([small, Buffer.from(`  big: "${'y'.repeat(7 * 1024 * 1024)}"\n`)])},
  )
  return cases
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer()
    server.on('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const {port} = server.address() as net.AddressInfo
      server.close(() => resolve(port))
    })
  })
}

/**
 * Starts Porch's wrapper-server fronting `entrypoint` (as in a function pod: `wrapper-server --port
 * P -- ENTRYPOINT`), on a port found free just before; it listens on `:port` too.
 */
export async function startPorchWrapper(wrapperServer: string, entrypoint: string[]): Promise<PorchRunner> {
  return startPorchProcess(wrapperServer, (port) => [`--port=${port}`, '--', ...entrypoint], 'wrapper-server')
}

export interface PorchRunner {
  child: ChildProcess
  port: number
  log(): string
  stop(): Promise<void>
}

/**
 * Starts Porch's func/server with only its exec runtime. It has no address flag: it listens on
 * `:port` (every address; the tests connect over loopback only) on a port found free just before.
 */
export async function startPorchRunner(server: string, bed: RunnerBed, extraArgs: string[] = []): Promise<PorchRunner> {
  return startPorchProcess(server, (port) => [`--port=${port}`, '--disable-runtimes=pod', `--config=${bed.configPath}`, `--functions=${bed.functionsDir}`, ...extraArgs], 'func/server')
}

async function startPorchProcess(binary: string, argsFor: (port: number) => string[], what: string): Promise<PorchRunner> {
  for (let attempt = 0; ; attempt++) {
    const port = await freePort()
    const child = spawn(binary, argsFor(port), {
      env: {PATH: process.env.PATH, HOME: process.env.HOME, OTEL_METRICS_EXPORTER: 'none', OTEL_TRACES_EXPORTER: 'none', OTEL_LOGS_EXPORTER: 'none'},
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let log = ''
    child.stdout!.on('data', (d: Buffer) => (log += d.toString()))
    child.stderr!.on('data', (d: Buffer) => (log += d.toString()))
    const exited = once(child, 'exit')
    const ready = await new Promise<boolean>((resolve) => {
      const started = Date.now()
      const tick = (): void => {
        if (child.exitCode !== null) return resolve(false)
        const socket = net.connect(port, '127.0.0.1')
        socket.once('connect', () => {
          socket.destroy()
          resolve(true)
        })
        socket.once('error', () => {
          socket.destroy()
          if (Date.now() - started > 30_000) resolve(false)
          else setTimeout(tick, 100)
        })
      }
      tick()
    })
    const stop = async (): Promise<void> => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM')
        const timer = setTimeout(() => child.kill('SIGKILL'), 5000)
        await exited
        clearTimeout(timer)
      }
    }
    if (ready) return {child, port, log: () => log, stop}
    await stop()
    if (attempt >= 2) throw new Error(`Porch's ${what} did not start:\n${log}`)
  }
}

/** What a raw call got: the response message's bytes as the server sent them, or the status. */
export interface RawReply {
  bytes?: Buffer
  code?: number
  details?: string
}

/** One EvaluateFunction call with identity (de)serializers: `message` goes out as it is, the reply's bytes come back as sent. */
export function callRaw(port: number, message: Buffer, maxReceive?: number): Promise<RawReply> {
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), maxReceive ? {'grpc.max_receive_message_length': maxReceive} : {})
  return new Promise<RawReply>((resolve) => {
    client.makeUnaryRequest(EVALUATE_METHOD_PATH, (b: Buffer) => b, (b: Buffer) => b, message, {deadline: Date.now() + 120_000}, (err, res) =>
      resolve(err ? {code: err.code, details: err.details} : {bytes: res!}),
    )
  }).finally(() => client.close())
}

/** Stops fnr serve (SIGTERM, waits for its exit) and Porch's runner, whichever were started. */
export async function stopRunners(fnr: ServeProcess | undefined, porch: PorchRunner | undefined): Promise<void> {
  fnr?.child.kill('SIGTERM')
  if (fnr) await fnr.exited
  await porch?.stop()
}
