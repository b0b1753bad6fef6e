/** Functions directories for the process tests. */
import {mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {writeExecutable} from '../../support/tmp.js'

/** A functions dir with the given shell functions, each mapped to example.com/<name>:v1. */
export async function functionsDirWith(dir: string, scripts: Record<string, string>): Promise<{configPath: string; functionsDir: string}> {
  const functionsDir = path.join(dir, 'functions')
  await mkdir(functionsDir, {recursive: true})
  const entries: string[] = []
  for (const [name, script] of Object.entries(scripts)) {
    await writeExecutable(path.join(functionsDir, name), script)
    entries.push(`- function: ${name}\n  images: [example.com/${name.toLowerCase()}:v1]`)
  }
  const configPath = path.join(dir, 'config.yaml')
  await writeFile(configPath, `functions:\n${entries.join('\n')}\n`)
  return {configPath, functionsDir}
}

