/**
 * An in-process EvaluatorServer on loopback with an echo evaluator, and a raw HTTP/2 session to it:
 * shared by test/grpc/hygiene.test.ts and test/grpc/hygiene-listener.test.ts.
 */
import {once} from 'node:events'
import http2 from 'node:http2'

import type {Evaluator} from '../../src/lib/evaluator.js'
import {EvaluatorServer} from '../../src/lib/grpc/server.js'

/** Returns the request's resource list unchanged. */
export const echo: Evaluator = {
  name: 'echo',
  evaluate: async (r) => ({resourceList: r.resourceList, log: Buffer.alloc(0), evaluator: 'echo'}),
  close: async () => {},
}

export const MiB = 1024 * 1024

/** An empty ResourceList. */
export const RL = Buffer.from('apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n')

/** Starts a serving EvaluatorServer (echo, 6 MiB messages, 127.0.0.1, a free port) with `options` over those defaults. */
export async function startServer(options: Partial<ConstructorParameters<typeof EvaluatorServer>[0]> = {}): Promise<EvaluatorServer> {
  const server = new EvaluatorServer({evaluator: echo, maxMessageSize: 6 * MiB, host: '127.0.0.1', port: 0, ...options})
  await server.start()
  server.setServing(true)
  return server
}

/** An HTTP/2 session to `address`, once the server's SETTINGS have arrived. */
export async function h2(address: string): Promise<http2.ClientHttp2Session> {
  const session = http2.connect(`http://${address}`)
  session.on('error', () => {})
  await once(session, 'remoteSettings')
  return session
}
