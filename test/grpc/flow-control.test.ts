/**
 * HTTP/2 flow control of fnr's gRPC servers (src/lib/grpc/flow-control.ts).
 *
 * Regression: with grpc-js's 64 KiB default windows, the 10-minute soak of `npm run reliability`
 * (64 calls in flight on one connection, as Porch's client multiplexes every call on one) saw about
 * 1.4 % of its 0.1-1 MiB requests wait out their whole 60 s deadline: the client's view of the
 * connection window sat at 0 while the server had received half a window it had not returned yet
 * (nghttp2 returns window once half of it is consumed). With windows as large as a message, the
 * same soak has no such call. What is checked here is what the servers announce to a client.
 *
 * Regression: the connection window is 1 MiB, not a message: with 6 MiB windows both ways, a burst
 * of 40 x 6 MiB calls on one connection (test/reliability/memory-limit.test.ts) stopped for good
 * under machine load, server and client sockets both full, because Node stops reading a
 * connection while its own write is incomplete (flow-control.ts). fnr's client keeps its window
 * as large as a response (a 1 MiB client window made large responses wait out their
 * deadline in the soak).
 */
import http2 from 'node:http2'

import {expect} from 'chai'

import type {EvaluationRequest} from '../../src/lib/evaluator.js'
import {CONNECTION_WINDOW, connectionWindowFor, receiveWindowFor} from '../../src/lib/grpc/flow-control.js'
import {silentLogger} from '../../src/lib/telemetry/log.js'
import {EvaluatorServer} from '../../src/lib/grpc/server.js'
import {startWrapperServer} from '../../src/lib/wrapper.js'

const MAX_MESSAGE = 6 * 1024 * 1024

const echo = {
  name: 'echo',
  evaluate: async (request: EvaluationRequest) => ({resourceList: request.resourceList, log: Buffer.alloc(0), evaluator: 'echo'}),
  close: async () => {},
}

describe('gRPC servers: HTTP/2 receive windows', function () {
  this.timeout(30_000)

  for (const kind of ['fnr serve (EvaluatorServer)', 'fnr wrapper-server'] as const) {
    it(`${kind} announces stream windows as large as its largest message, and a connection window of 1 MiB`, async () => {
      let port: number
      let stop: () => Promise<void>
      if (kind === 'fnr wrapper-server') {
        const running = await startWrapperServer({entrypoint: ['/bin/cat'], port: 0, host: '127.0.0.1', maxRequestBodySize: MAX_MESSAGE, gracePeriodMs: 0}, silentLogger, false)
        port = running.port
        stop = async () => void (await running.stop())
      } else {
        const server = new EvaluatorServer({evaluator: echo, maxMessageSize: MAX_MESSAGE, host: '127.0.0.1', port: 0})
        port = await server.start()
        stop = async () => void server.forceShutdown()
      }
      const session = http2.connect(`http://127.0.0.1:${port}`)
      // forceShutdown at the end sends a GOAWAY, an 'error' on a session nobody closed yet.
      session.on('error', () => {})
      try {
        // The server's first SETTINGS are grpc-js's; fnr's follow at once, with the connection's
        // WINDOW_UPDATE.
        const window = receiveWindowFor(MAX_MESSAGE)
        const raised = (): boolean => session.remoteSettings.initialWindowSize === window && session.state.remoteWindowSize === connectionWindowFor(window)
        for (let i = 0; i < 200 && !raised(); i++) await new Promise((r) => setTimeout(r, 10))
        expect(session.remoteSettings.initialWindowSize).to.equal(window)
        expect(session.state.remoteWindowSize).to.equal(CONNECTION_WINDOW)
      } finally {
        session.close()
        await stop()
      }
    })
  }
})
