/**
 * One entry of --pod-cache-config (Porch's list format; config/pod-cache-config.ts reads the file and turns
 * v1.5.7's map format into entries). Unknown keys are allowed, as Porch's YAML decoding ignores them; an empty
 * value (null) is an unset field. Numbers may be quoted ("2"). timeToLive is not checked here: Porch ignores a
 * bad one (the flag's TTL applies), and fnr says so with a warning.
 */
import type {Schema} from './validate.js'

/** A quantity: Kubernetes' int-or-string (its syntax is checked with the pod's resources, k8s/quantity.ts). */
const quantities: Schema = {type: ['object', 'null'], additionalProperties: {type: ['integer', 'number', 'string']}}

/** A count: an integer, a quoted one, or empty. */
const count: Schema = {type: ['integer', 'string', 'null'], format: 'integer'}

export const POD_CACHE_CONFIG_ENTRY: Schema = {
  type: 'object',
  required: ['name'],
  properties: {
    name: {type: 'string', format: 'non-blank'},
    maxWaitlistLength: count,
    maxParallelPodsPerFunction: count,
    resources: {type: ['object', 'null'], properties: {requests: quantities, limits: quantities}},
    responseCache: {type: ['boolean', 'string', 'null'], format: 'duration'},
  },
}
