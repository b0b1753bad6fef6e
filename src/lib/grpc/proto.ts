/**
 * Loading proto/evaluator.proto. The definition is loaded once per process and shared by the
 * server (fnr serve, wrapper-server) and the client (pod calls, tests, benchmarks).
 *
 * Normally it is read from PROTO_PATH. A build that has no proto/ directory at run time (the
 * packaged wrapper-server, a single executable) calls useEmbeddedEvaluatorDescriptor() first with
 * the protobufjs JSON descriptor that scripts/package-wrapper.mjs generates from the same file.
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

/** keepCase false: fields are camelCase in JS (resourceList). An embedded descriptor must be made with the same. */
export const EVALUATOR_LOAD_OPTIONS: protoLoader.Options = {
  keepCase: false,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
}

let cached: protoLoader.PackageDefinition | undefined

export function evaluatorPackageDefinition(): protoLoader.PackageDefinition {
  cached ??= protoLoader.loadSync(PROTO_PATH, EVALUATOR_LOAD_OPTIONS)
  return cached
}

/**
 * Uses a protobufjs JSON descriptor of evaluator.proto (parsed with keepCase false) instead of
 * reading PROTO_PATH. Must be called before anything loads the definition.
 */
export function useEmbeddedEvaluatorDescriptor(json: Parameters<typeof protoLoader.fromJSON>[0]): void {
  if (cached) throw new Error('the evaluator proto is already loaded; embed its descriptor before the first use')
  cached = protoLoader.fromJSON(json, EVALUATOR_LOAD_OPTIONS)
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
