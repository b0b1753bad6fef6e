// `npm run demo`: installs and builds what it needs, then shows fnr doing its job on the shipped
// example package: `fnr eval` (the CLI path) and `fnr serve` called over gRPC (the Porch path).
import {spawn, spawnSync} from 'node:child_process'
import path from 'node:path'

import {ROOT, ensureBuilt, ensureNpmDependencies, ensureSupportedNode} from './setup.mjs'

ensureSupportedNode()
ensureNpmDependencies()
ensureBuilt()

const fnr = path.join(ROOT, 'bin', 'run.js')
const example = path.join(ROOT, 'examples', 'hello')
const say = (text) => process.stdout.write(`\n\x1b[1m${text}\x1b[0m\n`)

say('$ fnr eval --input examples/hello --image fnr.local/set-namespace:v0.4 -- namespace=prod')
let r = spawnSync(process.execPath, [fnr, 'eval', '--input', example, '--image', 'fnr.local/set-namespace:v0.4', '--', 'namespace=prod'], {stdio: 'inherit', cwd: ROOT})
if (r.status !== 0) process.exit(r.status ?? 1)

say('$ fnr serve --disable-runtimes=pod   (then EvaluateFunction over gRPC, as Porch calls it)')
const serve = spawn(process.execPath, [fnr, 'serve', '--disable-runtimes=pod', '--port=0', '--log-level=3'], {
  cwd: ROOT,
  env: {...process.env, FNR_BIND_ADDRESS: '127.0.0.1'},
  stdio: ['ignore', 'inherit', 'pipe'],
})
let log = ''
const port = await new Promise((resolve, reject) => {
  serve.stderr.on('data', (c) => {
    log += c.toString()
    const m = /"port":(\d+).*fnr serve is ready/.exec(log)
    if (m) resolve(Number(m[1]))
  })
  serve.on('exit', (code) => reject(new Error(`fnr serve exited with ${code}:\n${log}`)))
})
process.stdout.write(`fnr serve is listening on 127.0.0.1:${port}\n`)

const {EvaluatorClient} = await import(path.join(ROOT, 'dist', 'lib', 'grpc', 'client.js'))
const {sourcePackage} = await import(path.join(ROOT, 'dist', 'lib', 'resourcelist', 'index.js'))
const client = new EvaluatorClient(`127.0.0.1:${port}`)
const input = Buffer.from(await sourcePackage([example]))
const image = 'fnr.local/set-labels:v0.2'
const withConfig = Buffer.from(
  `${input.toString().trimEnd()}\nfunctionConfig:\n  apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: function-input\n  data:\n    app: hello\n    tier: demo\n`,
)
say(`EvaluateFunction image=${image} (${withConfig.length} bytes in)`)
const res = await client.evaluate(image, withConfig, {deadline: Date.now() + 30_000})
process.stdout.write(res.resourceList.toString())
say('EvaluateFunction image=example.com/does-not-exist:v1')
try {
  await client.evaluate('example.com/does-not-exist:v1', withConfig)
} catch (err) {
  process.stdout.write(`-> ${err.kind}: ${err.message}\n`)
}
client.close()
serve.kill('SIGTERM')
await new Promise((resolve) => serve.once('exit', resolve))
process.stdout.write('\nfnr serve drained and stopped.\n')
