/**
 * Loading proto/evaluator.proto. The definition is loaded once per process and shared by the
 * server (fnr serve, wrapper-server) and the client (pod calls, tests, benchmarks).
 */
import {fileURLToPath} from 'node:url'

import * as grpc from '@grpc/grpc-js'
import * as protoLoader from '@grpc/proto-loader'

export const EVALUATOR_SERVICE = 'evaluator.FunctionEvaluator'
export const EVALUATE_METHOD_PATH = '/evaluator.FunctionEvaluator/EvaluateFunction'

export const PROTO_PATH = fileURLToPath(new URL('../../../proto/evaluator.proto', import.meta.url))

export interface EvaluateFunctionRequest {
  resourceList: Buffer
  image: string
}

export interface EvaluateFunctionResponse {
  resourceList: Buffer
  log: Buffer
}

let cached: protoLoader.PackageDefinition | undefined

export function evaluatorPackageDefinition(): protoLoader.PackageDefinition {
  cached ??= protoLoader.loadSync(PROTO_PATH, {
    keepCase: false,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  })
  return cached
}

export function evaluatorServiceDefinition(): grpc.ServiceDefinition {
  return evaluatorPackageDefinition()[EVALUATOR_SERVICE] as grpc.ServiceDefinition
}

/** A client constructor for evaluator.FunctionEvaluator, generated from the proto. */
export function evaluatorClientConstructor(): grpc.ServiceClientConstructor {
  const pkg = grpc.loadPackageDefinition(evaluatorPackageDefinition()) as unknown as {
    evaluator: {FunctionEvaluator: grpc.ServiceClientConstructor}
  }
  return pkg.evaluator.FunctionEvaluator
}
