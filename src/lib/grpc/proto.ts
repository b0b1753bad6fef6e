/**
 * The evaluator protocol, proto/evaluator.proto (Porch's, field for field): the service definition
 * the server (fnr serve, wrapper-server) and the client (pod calls, tests, benchmarks) share, with
 * its two messages coded by hand on Protocol Buffers' wire format (wire.ts). No .proto file is read
 * and no code is generated at run time: protobufjs and proto-loader took ~100 ms of CPU of every
 * start (docs/performance.md "Start → SERVING"), for two messages of two fields each.
 * test/grpc/wire.test.ts holds these codecs to protobufjs loaded from proto/evaluator.proto.
 */
import {fileURLToPath} from 'node:url'

import * as grpc from '@grpc/grpc-js'

import {LENGTH_DELIMITED, MessageWriter, readMessage, readString} from './wire.js'

export const EVALUATOR_SERVICE = 'evaluator.FunctionEvaluator'
export const EVALUATE_METHOD_PATH = '/evaluator.FunctionEvaluator/EvaluateFunction'

/** The protocol's source, shipped beside dist/ for clients in other languages (and read by the tests). */
export const PROTO_PATH = fileURLToPath(new URL('../../../proto/evaluator.proto', import.meta.url))

export interface EvaluateFunctionRequest {
  resourceList: Buffer
  image: string
}

export interface EvaluateFunctionResponse {
  resourceList: Buffer
  log: Buffer
}

/** Field numbers of evaluator.proto. */
const REQUEST_RESOURCE_LIST = 1
const REQUEST_IMAGE = 2
const RESPONSE_RESOURCE_LIST = 1
const RESPONSE_LOG = 2

const EMPTY = Buffer.alloc(0)

/** A bytes value as the callers give it: a Buffer (or any Uint8Array); a string is taken as UTF-8 text. */
type BytesInput = Uint8Array | string | undefined | null

function bytesOf(value: BytesInput): Uint8Array | string {
  return value ?? EMPTY
}

export function encodeRequest(request: {resourceList?: BytesInput; image?: string | null}): Buffer {
  return new MessageWriter()
    .bytes(REQUEST_RESOURCE_LIST, bytesOf(request.resourceList))
    .bytes(REQUEST_IMAGE, request.image ?? '')
    .finish()
}

/** The request's fields; resourceList is a view of `message` (as protobufjs gave it). */
export function decodeRequest(message: Buffer): EvaluateFunctionRequest {
  const request: EvaluateFunctionRequest = {resourceList: EMPTY, image: ''}
  readMessage(message, (field, value) => {
    if (value.wireType !== LENGTH_DELIMITED) return
    if (field === REQUEST_RESOURCE_LIST) request.resourceList = value.bytes
    else if (field === REQUEST_IMAGE) request.image = readString(value.bytes)
  })
  return request
}

/** The response's bytes: resource_list, then log, each left out when empty, as Go's protobuf writes them. */
export function encodeResponse(response: {resourceList?: BytesInput; log?: BytesInput}): Buffer {
  return new MessageWriter()
    .bytes(RESPONSE_RESOURCE_LIST, bytesOf(response.resourceList))
    .bytes(RESPONSE_LOG, bytesOf(response.log))
    .finish()
}

export function decodeResponse(message: Buffer): EvaluateFunctionResponse {
  const response: EvaluateFunctionResponse = {resourceList: EMPTY, log: EMPTY}
  readMessage(message, (field, value) => {
    if (value.wireType !== LENGTH_DELIMITED) return
    if (field === RESPONSE_RESOURCE_LIST) response.resourceList = value.bytes
    else if (field === RESPONSE_LOG) response.log = value.bytes
  })
  return response
}

const SERVICE: grpc.ServiceDefinition = {
  EvaluateFunction: {
    path: EVALUATE_METHOD_PATH,
    requestStream: false,
    responseStream: false,
    requestSerialize: encodeRequest,
    requestDeserialize: decodeRequest,
    responseSerialize: encodeResponse,
    responseDeserialize: decodeResponse,
    originalName: 'evaluateFunction',
  },
}

export function evaluatorServiceDefinition(): grpc.ServiceDefinition {
  return SERVICE
}

let clientConstructor: grpc.ServiceClientConstructor | undefined

/** A client constructor for evaluator.FunctionEvaluator (made once). */
export function evaluatorClientConstructor(): grpc.ServiceClientConstructor {
  clientConstructor ??= grpc.makeGenericClientConstructor(SERVICE, 'FunctionEvaluator')
  return clientConstructor
}
