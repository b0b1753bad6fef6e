/** A grpc.health.v1 client built from the proto grpc-health-check ships. */
import * as grpc from '@grpc/grpc-js'
import * as protoLoader from '@grpc/proto-loader'
import {protoPath} from 'grpc-health-check'

type HealthClient = grpc.Client & {
  check(req: {service: string}, cb: (err: grpc.ServiceError | null, res?: {status: string}) => void): void
  watch(req: {service: string}): grpc.ClientReadableStream<{status: string}>
  list(req: Record<string, never>, cb: (err: grpc.ServiceError | null, res?: {statuses: Record<string, {status: string}>}) => void): void
}

export function healthClient(address: string): HealthClient {
  const def = protoLoader.loadSync(protoPath, {keepCase: true, enums: String, defaults: true})
  const pkg = grpc.loadPackageDefinition(def) as unknown as {grpc: {health: {v1: {Health: grpc.ServiceClientConstructor}}}}
  return new pkg.grpc.health.v1.Health(address, grpc.credentials.createInsecure()) as unknown as HealthClient
}

export function checkHealth(client: HealthClient, service = ''): Promise<string> {
  return new Promise((resolve, reject) => client.check({service}, (err, res) => (err ? reject(err) : resolve(res!.status))))
}
