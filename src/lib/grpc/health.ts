/**
 * grpc.health.v1.Health, the server side: Check, Watch and List over a status per service name, as
 * grpc-health-check 2.1 (gRPC's own Node implementation, which fnr used until it cost a start
 * ~15 ms of proto loading) and grpc-go's health server answer them:
 * - Check: the status of a known service; NOT_FOUND "Health status unknown for service NAME" for
 *   any other;
 * - Watch: the status now (SERVICE_UNKNOWN for an unknown service), then every change, until the
 *   client cancels;
 * - List: every service and its status; RESOURCE_EXHAUSTED past 100 services.
 * Its messages are coded here on the wire format (wire.ts); grpc-health-probe's side of Check is in
 * health-probe.ts. test/grpc/health-service.test.ts holds both to grpc-health-check's own client
 * and proto.
 */
import type * as grpc from '@grpc/grpc-js'

import {LENGTH_DELIMITED, MessageWriter, readMessage, readString, VARINT} from './wire.js'

/** grpc.health.v1.HealthCheckResponse.ServingStatus, in its enum's order. */
export const SERVING_STATUSES = ['UNKNOWN', 'SERVING', 'NOT_SERVING', 'SERVICE_UNKNOWN'] as const
export type ServingStatus = (typeof SERVING_STATUSES)[number]

export const HEALTH_SERVICE = 'grpc.health.v1.Health'
const NOT_FOUND = 5
const RESOURCE_EXHAUSTED = 8
/** List answers at most this many services (grpc-go's and grpc-health-check's limit). */
const LIST_LIMIT = 100

/** HealthCheckRequest {string service = 1} */
export function encodeCheckRequest(request: {service?: string}): Buffer {
  return new MessageWriter().bytes(1, request.service ?? '').finish()
}

export function decodeCheckRequest(message: Buffer): {service: string} {
  let service = ''
  readMessage(message, (field, value) => {
    if (field === 1 && value.wireType === LENGTH_DELIMITED) service = readString(value.bytes)
  })
  return {service}
}

/** HealthCheckResponse {ServingStatus status = 1} */
export function encodeCheckResponse(response: {status: ServingStatus}): Buffer {
  return new MessageWriter().varint(1, SERVING_STATUSES.indexOf(response.status)).finish()
}

/** The status of a HealthCheckResponse; a number this protocol version does not name is given as a number. */
export function decodeCheckResponse(message: Buffer): {status: ServingStatus | number} {
  let status = 0
  readMessage(message, (field, value) => {
    if (field === 1 && value.wireType === VARINT) status = value.value
  })
  return {status: SERVING_STATUSES[status] ?? status}
}

/** HealthListResponse {map<string, HealthCheckResponse> statuses = 1}: one entry message {key = 1, value = 2} each. */
function encodeListResponse(response: {statuses: Map<string, ServingStatus>}): Buffer {
  const writer = new MessageWriter()
  for (const [name, status] of response.statuses) {
    writer.bytes(1, new MessageWriter().bytes(1, name).bytes(2, encodeCheckResponse({status})).finish())
  }
  return writer.finish()
}

const ignore = (): Record<string, never> => ({})

function unary(name: string, requestDeserialize: (b: Buffer) => unknown, responseSerialize: (v: never) => Buffer, responseStream = false): grpc.MethodDefinition<unknown, unknown> {
  return {
    path: `/${HEALTH_SERVICE}/${name}`,
    requestStream: false,
    responseStream,
    requestSerialize: () => Buffer.alloc(0),
    requestDeserialize,
    responseSerialize: responseSerialize as (v: unknown) => Buffer,
    responseDeserialize: ignore,
    originalName: name[0]!.toLowerCase() + name.slice(1),
  }
}

/** The service as grpc-js registers it (server side: requests are read, responses written). */
const HEALTH_DEFINITION: grpc.ServiceDefinition = {
  Check: unary('Check', decodeCheckRequest, encodeCheckResponse),
  Watch: unary('Watch', decodeCheckRequest, encodeCheckResponse, true),
  List: unary('List', ignore, encodeListResponse),
}

/** A server's health statuses, served as grpc.health.v1.Health. */
export class HealthService {
  private readonly statuses = new Map<string, ServingStatus>()
  private readonly watchers = new Map<string, Set<(status: ServingStatus) => void>>()

  constructor(initial: Record<string, ServingStatus> = {}) {
    for (const [name, status] of Object.entries(initial)) this.statuses.set(name, status)
  }

  setStatus(service: string, status: ServingStatus): void {
    this.statuses.set(service, status)
    for (const watcher of this.watchers.get(service) ?? []) watcher(status)
  }

  addToServer(server: grpc.Server): void {
    server.addService(HEALTH_DEFINITION, {
      Check: (call: grpc.ServerUnaryCall<{service: string}, unknown>, callback: grpc.sendUnaryData<{status: ServingStatus}>) => {
        const name = call.request.service
        const status = this.statuses.get(name)
        if (status) callback(null, {status})
        else callback({code: NOT_FOUND, details: `Health status unknown for service ${name}`})
      },
      Watch: (call: grpc.ServerWritableStream<{service: string}, {status: ServingStatus}>) => {
        const name = call.request.service
        const watcher = (status: ServingStatus): void => {
          call.write({status})
        }
        let set = this.watchers.get(name)
        if (!set) this.watchers.set(name, (set = new Set()))
        set.add(watcher)
        call.on('cancelled', () => {
          set.delete(watcher)
          if (set.size === 0 && this.watchers.get(name) === set) this.watchers.delete(name)
        })
        call.write({status: this.statuses.get(name) ?? 'SERVICE_UNKNOWN'})
      },
      List: (_call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<{statuses: Map<string, ServingStatus>}>) => {
        if (this.statuses.size > LIST_LIMIT) callback({code: RESOURCE_EXHAUSTED, details: 'Too many services to list.'})
        else callback(null, {statuses: new Map(this.statuses)})
      },
    })
  }
}
