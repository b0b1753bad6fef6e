/**
 * fnr serve (exec runtime) in process with a gRPC client to it: the bed of test/grpc/serve.test.ts
 * and test/grpc/serve-refusals.test.ts.
 */
import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import type {RunningServer} from '../../src/lib/serve.js'
import {makeFunctionsDir, serveOptions, startInProcess} from './serve.js'
import type {TempDirs} from './tmp.js'

export interface ServeWithClient {
  running: RunningServer
  client: EvaluatorClient
  /** The functions directory of the test functions (makeFunctionsDir). */
  functionsDir: string
}

/** Starts fnr serve on the test functions in a new temp dir of `temp`, and a client to it. */
export async function startServeWithClient(temp: TempDirs, maxRequestBodySize: number): Promise<ServeWithClient> {
  const dir = await temp.make()
  const fns = await makeFunctionsDir(dir)
  const running = await startInProcess(serveOptions({...fns, maxRequestBodySize}))
  // The client allows more than the server, so the server's own limits are what is tested.
  const client = new EvaluatorClient(`127.0.0.1:${running.port}`, {maxMessageSize: 16 * 1024 * 1024})
  return {running, client, functionsDir: fns.functionsDir}
}

/** Closes the client, stops the server and removes `temp`'s directories. */
export async function stopServeWithClient({running, client}: Pick<ServeWithClient, 'running' | 'client'>, temp: TempDirs): Promise<void> {
  client.close()
  await running.stop()
  await temp.cleanup()
}
