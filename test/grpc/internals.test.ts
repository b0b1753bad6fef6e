/**
 * The private state fnr reaches into (src/lib/grpc/internals.ts): grpc-js's HTTP/2 servers and the
 * socket under a Node HTTP/2 session. These fail when a grpc-js or Node upgrade moves either, so
 * the upgrade is caught here rather than by a server running without its HTTP/2 limits.
 */
import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'
import {readFileSync} from 'node:fs'
import http2, {type Http2Session} from 'node:http2'

import {FnrError} from '../../src/lib/errors.js'
import {takePrefixed} from '../../src/lib/grpc/reply.js'
import {frameResponsesInPlace, grpcJsVersion, http2ServersOf, sessionSocket, TESTED_GRPC_JS} from '../../src/lib/grpc/internals.js'

describe('grpc/internals.ts: the private state fnr reaches, pinned', () => {
  it('the installed grpc-js is a tested version, and package.json pins it exactly', () => {
    expect(TESTED_GRPC_JS, `grpc-js ${grpcJsVersion()} is installed: test internals.ts with it and add it to TESTED_GRPC_JS`).to.include(grpcJsVersion())
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {dependencies: Record<string, string>}
    expect(TESTED_GRPC_JS).to.include(pkg.dependencies['@grpc/grpc-js'])
  })

  it('finds the HTTP/2 servers of a bound grpc-js server, and sees its sessions and streams through them', async () => {
    const server = new grpc.Server()
    const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))))
    try {
      const servers = http2ServersOf(server)
      expect(servers).to.have.length(1)
      const seen: string[] = []
      let session: Http2Session | undefined
      servers[0]!.on('session', (s) => {
        session = s
        seen.push('session')
      })
      servers[0]!.on('stream', () => seen.push('stream'))
      const client = http2.connect(`http://127.0.0.1:${port}`)
      const req = client.request({':method': 'POST', ':path': '/no.Such/Method', 'content-type': 'application/grpc', te: 'trailers'})
      req.end(Buffer.alloc(5))
      req.resume()
      await new Promise((resolve) => req.on('close', resolve))
      expect(seen).to.deep.equal(['session', 'stream'])
      // the raw socket under the session counts what the client sent; kept, it is still readable after the session closed (hygiene.ts)
      const socket = sessionSocket(session!)
      expect(socket, 'the socket under the session').to.not.equal(undefined)
      const read = socket!.bytesRead
      expect(read).to.be.greaterThan(24)
      client.close()
      await new Promise((resolve) => session!.once('close', resolve))
      expect(socket!.bytesRead).to.be.at.least(read)
    } finally {
      server.forceShutdown()
    }
  })

  it('frames a response in place on this grpc-js: its private framing method is there and is replaced once', () => {
    // (installed as the server installs it: a first install stays for the whole process)
    expect(frameResponsesInPlace(takePrefixed)).to.equal(true)
    expect(frameResponsesInPlace(() => undefined), 'a second install keeps the first').to.equal(true)
  })

  it('a grpc-js without the field stops the server with an InternalError naming the version, not a warning', () => {
    const unbound = new grpc.Server()
    expect(() => http2ServersOf(unbound)).to.throw(FnrError, new RegExp(`grpc-js ${grpcJsVersion().replace(/\./g, '\\.')} \\(tested: `))
    expect(() => http2ServersOf({} as grpc.Server)).to.throw(FnrError, /the server does not start/)
  })
})
