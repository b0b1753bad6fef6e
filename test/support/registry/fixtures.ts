/** The images the registry suites push, built once per suite into an OCI layout and copied with skopeo. */
import {mkdtemp, rm} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'

import {OciLayout, pushWithSkopeo, type BuiltImage, type Descriptor, type ImageSpec} from './oci-layout.js'
import type {TestRegistry} from './registry.js'

export interface SeededImages {
  /** OCI manifest, Entrypoint ["/bin/fn"] and Cmd ["--verbose"]. */
  hello: BuiltImage
  /** OCI index: linux/amd64 (Entrypoint ["/fn-amd64"]) and linux/arm64 (Entrypoint ["/fn-arm64"]). */
  multi: {index: Descriptor; images: BuiltImage[]}
  entryOnly?: BuiltImage
  cmdOnly?: BuiltImage
  neither?: BuiltImage
  armOnly?: BuiltImage
  /** A second image pushed later to a moving tag. */
  other?: BuiltImage
}

export const HELLO_SPEC: ImageSpec = {entrypoint: ['/bin/fn'], cmd: ['--verbose'], files: {'bin/fn': '#!/bin/sh\ncat\n'}}
export const MULTI_SPECS: ImageSpec[] = [
  {architecture: 'amd64', entrypoint: ['/fn-amd64']},
  {architecture: 'arm64', entrypoint: ['/fn-arm64']},
]

/**
 * Pushes fn/hello:v1 (OCI), fn/multi:v1 (OCI index, two platforms) and, with `full`, also
 * fn/hello:docker (Docker v2 schema 2), fn/multi:list (Docker manifest list), fn/entry-only:v1,
 * fn/cmd-only:v1, fn/neither:v1, fn/arm-only:v1 and fn/other:v1.
 */
export async function seedImages(registry: TestRegistry, options: {authFile?: string; full?: boolean} = {}): Promise<SeededImages> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'fnr-layout-'))
  try {
    const layout = new OciLayout(dir)
    const hello = layout.addImage(HELLO_SPEC, 'hello')
    const multi = layout.addIndex(MULTI_SPECS, 'multi')
    const seeded: SeededImages = {hello, multi}
    if (options.full) {
      seeded.entryOnly = layout.addImage({entrypoint: ['/usr/local/bin/function'], files: {'e.txt': 'entry only\n'}}, 'entry-only')
      seeded.cmdOnly = layout.addImage({cmd: ['/bin/sh', '-c', 'cat'], files: {'c.txt': 'cmd only\n'}}, 'cmd-only')
      seeded.neither = layout.addImage({files: {'n.txt': 'neither\n'}}, 'neither')
      seeded.armOnly = layout.addImage({architecture: 'arm64', entrypoint: ['/fn'], files: {'a.txt': 'arm only\n'}}, 'arm-only')
      seeded.other = layout.addImage({entrypoint: ['/other'], files: {'o.txt': 'other\n'}}, 'other')
    }
    await layout.write()
    const auth = {authFile: options.authFile}
    await pushWithSkopeo(dir, 'hello', registry, 'fn/hello:v1', auth)
    await pushWithSkopeo(dir, 'multi', registry, 'fn/multi:v1', {...auth, all: true})
    if (options.full) {
      await pushWithSkopeo(dir, 'hello', registry, 'fn/hello:docker', {...auth, dockerFormat: true})
      await pushWithSkopeo(dir, 'multi', registry, 'fn/multi:list', {...auth, all: true, dockerFormat: true})
      await pushWithSkopeo(dir, 'entry-only', registry, 'fn/entry-only:v1', auth)
      await pushWithSkopeo(dir, 'cmd-only', registry, 'fn/cmd-only:v1', auth)
      await pushWithSkopeo(dir, 'neither', registry, 'fn/neither:v1', auth)
      await pushWithSkopeo(dir, 'arm-only', registry, 'fn/arm-only:v1', auth)
      await pushWithSkopeo(dir, 'other', registry, 'fn/other:v1', auth)
    }
    return seeded
  } finally {
    await rm(dir, {recursive: true, force: true})
  }
}

/** Pushes one more image to `repository:tag` (to move a tag). */
export async function pushImage(registry: TestRegistry, repositoryAndTag: string, spec: ImageSpec, authFile?: string): Promise<BuiltImage> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'fnr-layout-'))
  try {
    const layout = new OciLayout(dir)
    const image = layout.addImage(spec, 'img')
    await layout.write()
    await pushWithSkopeo(dir, 'img', registry, repositoryAndTag, {authFile})
    return image
  } finally {
    await rm(dir, {recursive: true, force: true})
  }
}
