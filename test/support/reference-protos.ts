/**
 * The protocol's messages as protobufjs codes them, loaded from the .proto files (proto/evaluator.proto,
 * grpc-health-check's health.proto): the reference fnr's own codecs (src/lib/grpc/proto.ts,
 * health.ts, wire.ts) are held to. protobufjs writes a proto3 field it was given even when it is
 * empty; Go's protobuf (Porch's runner) and fnr leave it out.
 */
import * as protoLoader from '@grpc/proto-loader'
import {service as healthService} from 'grpc-health-check'

import {PROTO_PATH} from '../../src/lib/grpc/proto.js'

export type ReferenceMethod = protoLoader.MethodDefinition<object, object>

let evaluator: ReferenceMethod | undefined

/** EvaluateFunction as @grpc/proto-loader defines it from proto/evaluator.proto (camelCase fields, defaults filled in). */
export function referenceEvaluateFunction(): ReferenceMethod {
  evaluator ??= (protoLoader.loadSync(PROTO_PATH, {keepCase: false, longs: String, enums: String, defaults: true, oneofs: true})['evaluator.FunctionEvaluator'] as protoLoader.ServiceDefinition)
    .EvaluateFunction as ReferenceMethod
  return evaluator
}

/** grpc.health.v1.Health's methods as grpc-health-check defines them (enums as strings). */
export function referenceHealth(method: 'Check' | 'Watch' | 'List'): ReferenceMethod {
  return (healthService as unknown as protoLoader.ServiceDefinition)[method] as ReferenceMethod
}
