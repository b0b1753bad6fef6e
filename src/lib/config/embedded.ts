/** Where the functions fnr ships live (functions/ next to the package's dist/ and src/). */
import {existsSync} from 'node:fs'
import {fileURLToPath} from 'node:url'

export const EMBEDDED_FUNCTIONS_DIR = fileURLToPath(new URL('../../../functions', import.meta.url))
export const EMBEDDED_EXEC_CONFIG = fileURLToPath(new URL('../../../functions/config.yaml', import.meta.url))

export interface ExecPaths {
  configPath: string
  functionsDir: string
  /** True when the shipped functions are used because nothing else was configured. */
  embedded: boolean
}

/**
 * Porch's defaults are ./config.yaml and ./functions. When the user set neither flag and
 * ./config.yaml does not exist, use the shipped functions instead of failing.
 */
export function resolveExecPaths(config: string, functions: string, configSetByUser: boolean, functionsSetByUser: boolean): ExecPaths {
  if (!configSetByUser && !functionsSetByUser && !existsSync(config) && existsSync(EMBEDDED_EXEC_CONFIG)) {
    return {configPath: EMBEDDED_EXEC_CONFIG, functionsDir: EMBEDDED_FUNCTIONS_DIR, embedded: true}
  }
  return {configPath: config, functionsDir: functions, embedded: false}
}
