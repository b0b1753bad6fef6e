/**
 * The exec runtime's configuration: Porch's config.yaml format, mapping image names to binaries
 * in the functions directory.
 *
 *   functions:
 *     - function: set-namespace          # a file name inside --functions
 *       images:
 *         - ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.1
 *
 * Unlike upstream, every entry is checked at load time: the binary must stay inside the
 * functions directory (no absolute paths, no "..", no symlink that resolves outside), exist, be a
 * regular file and be executable. A bad entry is a startup error that names it.
 */
import {constants as fsConstants} from 'node:fs'
import {access, realpath, stat} from 'node:fs/promises'
import path from 'node:path'

import {FnrError} from '../errors.js'
import {DEFAULT_IMAGE_PREFIX, normaliseImage} from './image-ref.js'
import {readConfigFile} from '../read-file.js'

export interface ExecConfigOptions {
  /** Path of config.yaml; "" means no exec functions at all. */
  configPath: string
  functionsDir: string
  defaultImagePrefix?: string
}

export interface ExecFunction {
  /** The entry's `function` value. */
  name: string
  /** Absolute, symlink-resolved path of the binary. */
  binary: string
  images: string[]
}

export class ExecConfig {
  private readonly exact = new Map<string, ExecFunction>()
  private readonly normalised = new Map<string, ExecFunction>()

  constructor(
    readonly functions: ExecFunction[],
    readonly functionsDir: string,
    readonly defaultImagePrefix: string,
    readonly warnings: string[] = [],
  ) {
    for (const fn of functions) {
      for (const image of fn.images) {
        if (!this.exact.has(image)) this.exact.set(image, fn)
        const key = normaliseImage(image, defaultImagePrefix)
        if (!this.normalised.has(key)) this.normalised.set(key, fn)
      }
    }
  }

  static empty(functionsDir = '', defaultImagePrefix = DEFAULT_IMAGE_PREFIX): ExecConfig {
    return new ExecConfig([], functionsDir, defaultImagePrefix)
  }

  /** The function for an image: exact string match first, then the normalised reference. */
  lookup(image: string): ExecFunction | undefined {
    const hit = this.exact.get(image)
    if (hit) return hit
    if (image.trim() === '') return undefined
    return this.normalised.get(normaliseImage(image, this.defaultImagePrefix))
  }

  get imageCount(): number {
    return this.exact.size
  }
}

function entryName(index: number, fn?: unknown): string {
  return typeof fn === 'string' ? `functions[${index}] (function ${JSON.stringify(fn)})` : `functions[${index}]`
}

/** Checks that `name` names an executable regular file inside the functions directory; returns its real path. */
export async function resolveBinary(functionsDirReal: string, name: string, where: string): Promise<string> {
  if (name.trim() === '' || name.includes('\0')) throw new FnrError('Config', `${where}: the function name is empty or invalid`)
  if (path.isAbsolute(name)) throw new FnrError('Config', `${where}: absolute paths are not allowed; name a file inside the functions directory`)
  if (name.split(/[\\/]/).includes('..')) throw new FnrError('Config', `${where}: ".." is not allowed; the binary must stay inside the functions directory`)
  const candidate = path.join(functionsDirReal, name)
  let real: string
  try {
    real = await realpath(candidate)
  } catch {
    throw new FnrError('Config', `${where}: binary ${candidate} does not exist`, {details: {missingBinary: true}})
  }
  if (real !== functionsDirReal && !real.startsWith(functionsDirReal + path.sep)) {
    throw new FnrError('Config', `${where}: ${candidate} resolves to ${real}, outside the functions directory`)
  }
  const info = await stat(real)
  if (!info.isFile()) throw new FnrError('Config', `${where}: ${candidate} is not a regular file`, {details: {missingBinary: true}})
  try {
    await access(real, fsConstants.X_OK)
  } catch {
    throw new FnrError('Config', `${where}: ${candidate} is not executable`, {details: {missingBinary: true}})
  }
  return real
}

export async function loadExecConfig(options: ExecConfigOptions): Promise<ExecConfig> {
  const prefix = options.defaultImagePrefix ?? DEFAULT_IMAGE_PREFIX
  if (options.configPath === '') return ExecConfig.empty(options.functionsDir, prefix)

  // Only a regular file (or a symlink to one, as in a mounted ConfigMap) of a sane size: a FIFO
  // would block startup and a device could be read forever (read-file.ts).
  const text = (await readConfigFile(options.configPath, {label: `cannot read exec config ${JSON.stringify(options.configPath)}`})).toString('utf8')
  // Imported lazily: YAML is not needed on the request path.
  const {parse} = await import('yaml')
  let doc: unknown
  try {
    doc = parse(text, {maxAliasCount: 50})
  } catch (err) {
    throw new FnrError('Config', `cannot parse exec config ${JSON.stringify(options.configPath)}: ${(err as Error).message.split('\n')[0]}`, {cause: err})
  }
  const where = `exec config ${JSON.stringify(options.configPath)}`
  if (doc === null || doc === undefined) return ExecConfig.empty(options.functionsDir, prefix)
  if (typeof doc !== 'object' || Array.isArray(doc)) throw new FnrError('Config', `${where}: expected a mapping with a "functions" list`)
  const list = (doc as Record<string, unknown>).functions
  if (list === undefined || list === null) return ExecConfig.empty(options.functionsDir, prefix)
  if (!Array.isArray(list)) throw new FnrError('Config', `${where}: "functions" must be a list`)

  let functionsDirReal: string
  try {
    functionsDirReal = await realpath(options.functionsDir)
  } catch {
    throw new FnrError('Config', `functions directory ${JSON.stringify(options.functionsDir)} does not exist`)
  }

  const functions: ExecFunction[] = []
  const warnings: string[] = []
  const seen = new Map<string, string>()
  for (const [index, raw] of list.entries()) {
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
      throw new FnrError('Config', `${where}: ${entryName(index)} must be a mapping with "function" and "images"`)
    }
    const entry = raw as Record<string, unknown>
    const at = `${where}: ${entryName(index, entry.function)}`
    if (typeof entry.function !== 'string') throw new FnrError('Config', `${at}: "function" must be a string`)
    if (!Array.isArray(entry.images) || entry.images.some((i) => typeof i !== 'string' || i.trim() === '')) {
      throw new FnrError('Config', `${at}: "images" must be a list of non-empty strings`)
    }
    const binary = await resolveBinary(functionsDirReal, entry.function, at)
    const images: string[] = []
    for (const image of entry.images as string[]) {
      const previous = seen.get(image)
      if (previous !== undefined) {
        warnings.push(`ignoring duplicate image ${JSON.stringify(image)} in ${at}; it is already mapped to ${JSON.stringify(previous)}`)
        continue
      }
      seen.set(image, entry.function)
      images.push(image)
    }
    functions.push({name: entry.function, binary, images})
  }
  return new ExecConfig(functions, functionsDirReal, prefix, warnings)
}
