/**
 * The FunctionConfig schema: the openAPIV3Schema of the CRD fnr ships
 * (manifests/function-config/crds/functionconfigs.yaml, the file the cluster gets), read once, so fnr
 * validates objects by the same rules the API server does. The package ships that folder (package.json
 * `files`, the image's Dockerfile) and it is read from beside dist/ or src/, as proto/ is.
 */
import {readFile} from 'node:fs/promises'
import {fileURLToPath} from 'node:url'

import {parse} from 'yaml'

import {FnrError} from '../errors.js'
import {compileSchema, type Schema} from './validate.js'

export const FUNCTION_CONFIG_CRD_PATH = fileURLToPath(new URL('../../../manifests/function-config/crds/functionconfigs.yaml', import.meta.url))

let loading: Promise<Schema> | undefined

/** The CRD's openAPIV3Schema (its served version), compiled; an unreadable or malformed CRD file is an Internal error. */
export function functionConfigSchema(version = 'v1alpha1'): Promise<Schema> {
  loading ??= (async () => {
    const crd = parse(await readFile(FUNCTION_CONFIG_CRD_PATH, 'utf8')) as {spec?: {versions?: Array<{name?: string; schema?: {openAPIV3Schema?: Schema}}>}}
    const schema = crd?.spec?.versions?.find((v) => v.name === version)?.schema?.openAPIV3Schema
    if (!schema) throw new FnrError('Internal', `${FUNCTION_CONFIG_CRD_PATH} has no openAPIV3Schema for ${version}`)
    compileSchema(schema)
    return schema
  })().catch((err: unknown) => {
    loading = undefined
    throw err instanceof FnrError ? err : new FnrError('Internal', `the FunctionConfig schema (${FUNCTION_CONFIG_CRD_PATH}) cannot be loaded: ${(err as Error).message}`, {cause: err})
  })
  return loading
}
