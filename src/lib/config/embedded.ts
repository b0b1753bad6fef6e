/** Where the functions fnr ships live (functions/ next to the package's dist/ and src/). */
import {existsSync, readFileSync} from 'node:fs'

import {parse} from 'yaml'
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
 * Porch's defaults are ./config.yaml and ./functions. When the user set neither flag, the shipped
 * functions are used instead when ./config.yaml does not exist, when it is not an exec config (a
 * kpt package's config.yaml, say: it is ignored with a warning), and, for the one-shot commands
 * (`cli`: eval, test, render), always: a file that happens to be in the working directory never
 * decides silently what an image runs there.
 */
export function resolveExecPaths(
  config: string,
  functions: string,
  configSetByUser: boolean,
  functionsSetByUser: boolean,
  options: {cli?: boolean; warn?: (message: string) => void} = {},
): ExecPaths {
  const embedded = {configPath: EMBEDDED_EXEC_CONFIG, functionsDir: EMBEDDED_FUNCTIONS_DIR, embedded: true}
  if (!configSetByUser && !functionsSetByUser && existsSync(EMBEDDED_EXEC_CONFIG)) {
    if (options.cli || !existsSync(config)) return embedded
    if (!looksLikeExecConfig(config)) {
      ;(options.warn ?? ((m: string) => process.stderr.write(`fnr: warning: ${m}\n`)))(
        `${config} is not an exec config (no top-level "functions:"); it is ignored and the shipped functions are used (give --config to use a file)`,
      )
      return embedded
    }
  }
  return {configPath: config, functionsDir: functions, embedded: false}
}

/** An exec config (Porch's config.yaml) is a YAML mapping with `functions` and no `kind`. */
export function looksLikeExecConfig(file: string): boolean {
  try {
    const doc = parse(readFileSync(file, 'utf8')) as unknown
    return typeof doc === 'object' && doc !== null && !Array.isArray(doc) && 'functions' in doc && !('kind' in doc)
  } catch {
    // Unreadable or not YAML: let the config loader say what is wrong with it.
    return true
  }
}
