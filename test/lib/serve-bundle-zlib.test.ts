/**
 * The serve bundle's lazy zlib (scripts/bundles.mjs LAZY_BUILTINS): a start in a Node of its own leaves
 * zlib unloaded, and a gzip-compressed call still works. An integration spec (it starts a process);
 * the bundle's static checks are in ./lazy-loading.test.ts (unit).
 */
import {expect} from 'chai'
import {execFile} from 'node:child_process'
import path from 'node:path'
import {promisify} from 'node:util'

import {makeFunctionsDir, REPO_ROOT} from '../support/serve.js'
import {TempDirs} from '../support/tmp.js'

describe('the serve bundle loads zlib on first use', () => {
  it('a start of the serve bundle leaves zlib unloaded (grpc-js gets a stand-in), and a gzip-compressed call is inflated through the stand-in', async function () {
    this.timeout(60_000)
    const temp = new TempDirs()
    try {
      const {configPath, functionsDir} = await makeFunctionsDir(await temp.make('fnr-lazy-builtins-'))
      // A Node of its own: starts the bundle's server, records which of these built-ins are loaded
      // once it is ready, then makes one call compressed with gzip (grpc-js's compression filter
      // on the server inflates it with zlib, reached through its stand-in).
      const script = `
        const names = ['zlib']
        const loaded = () => names.filter((n) => process.moduleLoadList.includes('NativeModule ' + n))
        const net = await import('node:net')
        const port = await new Promise((resolve) => {
          const s = net.createServer().listen(0, '127.0.0.1', () => {
            const {port} = s.address()
            s.close(() => resolve(port))
          })
        })
        const {runServeFast} = await import(${JSON.stringify(path.join(REPO_ROOT, 'dist', 'bundles', 'serve', 'fast-serve.bundle.mjs'))})
        void runServeFast(['--port=' + port, '--disable-runtimes=pod', '--config=${configPath}', '--functions=${functionsDir}', '--log-level=1'])
        // ready once it accepts a connection (the logger writes to the descriptor, not process.stderr)
        for (;;) {
          const up = await new Promise((resolve) => net.connect(port, '127.0.0.1').once('connect', function () { this.destroy(); resolve(true) }).once('error', () => resolve(false)))
          if (up) break
          await new Promise((r) => setTimeout(r, 20))
        }
        const atReady = loaded()
        // One EvaluateFunction call by hand, its message gzip-compressed (flag 1, grpc-encoding: gzip):
        // the server can answer it only by inflating it with zlib.
        const http2 = await import('node:http2')
        const zlib = await import('node:zlib')
        const input = Buffer.from('apiVersion: config.kubernetes.io/v1\\nkind: ResourceList\\nitems: []\\n')
        const image = Buffer.from('example.com/cat:v1')
        const message = Buffer.concat([Buffer.from([0x0a, input.length]), input, Buffer.from([0x12, image.length]), image])
        const gz = zlib.gzipSync(message)
        const head = Buffer.alloc(5)
        head[0] = 1
        head.writeUInt32BE(gz.length, 1)
        const session = http2.connect('http://127.0.0.1:' + port)
        const req = session.request({':method': 'POST', ':path': '/evaluator.FunctionEvaluator/EvaluateFunction', 'content-type': 'application/grpc', te: 'trailers', 'grpc-encoding': 'gzip', 'grpc-accept-encoding': 'identity'})
        const chunks = []
        req.on('data', (c) => chunks.push(c))
        const trailers = new Promise((resolve) => req.on('trailers', (t) => resolve(t['grpc-status'])))
        req.end(Buffer.concat([head, gz]))
        const status = await trailers
        session.close()
        const body = Buffer.concat(chunks)
        // the answer: flag 0, length, then field 1 (resource_list)
        const echoed = body[0] === 0 && body[5] === 0x0a && Buffer.compare(body.subarray(7, 7 + body[6]), input) === 0
        process.stdout.write(JSON.stringify({atReady, status, echoed}))
        process.exit(0)
      `
      const {stdout} = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], {cwd: REPO_ROOT, env: {...process.env, FNR_BIND_ADDRESS: '127.0.0.1'}})
      expect(JSON.parse(stdout)).to.deep.equal({atReady: [], status: '0', echoed: true})
    } finally {
      await temp.cleanup()
    }
  })

})
