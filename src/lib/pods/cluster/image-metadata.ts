/**
 * Where the pod runtime learns what to run in a function image: the command after "--" (the
 * image's Entrypoint and Cmd, by the registry client's command rule) and its digest. The default
 * asks the registry (lib/registry); tests and special setups inject a fixed map.
 */
import {FnrError} from '../../errors.js'
import type {RegistryClient} from '../../registry/client.js'

export interface FunctionImageInfo {
  /** What the wrapper server runs for each call (never empty). */
  command: string[]
  /** The platform manifest's digest, when known. */
  digest?: string
}

export interface ImageMetadataSource {
  describe(image: string, options?: {signal?: AbortSignal}): Promise<FunctionImageInfo>
}

/** Entrypoints from the image registry (cached by the RegistryClient). */
export class RegistryMetadataSource implements ImageMetadataSource {
  constructor(private readonly client: Pick<RegistryClient, 'inspect'>) {}

  async describe(image: string, options: {signal?: AbortSignal} = {}): Promise<FunctionImageInfo> {
    const meta = await this.client.inspect(image, {signal: options.signal, requireCommand: true})
    return {command: meta.command, digest: meta.digest}
  }
}

/** A fixed image → command map (or function); an unknown image is a FailedPrecondition. */
export class StaticMetadataSource implements ImageMetadataSource {
  constructor(private readonly lookup: Record<string, string[]> | ((image: string) => string[] | undefined)) {}

  async describe(image: string): Promise<FunctionImageInfo> {
    const command = typeof this.lookup === 'function' ? this.lookup(image) : this.lookup[image]
    if (!command || command.length === 0) {
      throw new FnrError('FailedPrecondition', `no entrypoint is known for image "${image}"`)
    }
    return {command: [...command]}
  }
}
