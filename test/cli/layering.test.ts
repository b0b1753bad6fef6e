/**
 * src/lib imports no oclif and nothing of src/cli (the CLI adapter): the layering
 * docs/architecture.md states. src/bin (the packaged wrapper-server and health probe, single
 * executables without oclif) holds to it too: its flags come from src/lib's specs.
 */
import {expect} from 'chai'
import {readdir, readFile} from 'node:fs/promises'
import path from 'node:path'

import {REPO_ROOT} from '../support/serve.js'

async function sources(dir: string): Promise<string[]> {
  const out: string[] = []
  for (const e of await readdir(dir, {withFileTypes: true})) {
    const p = path.join(dir, e.name)
    if (e.isDirectory()) out.push(...(await sources(p)))
    else if (e.name.endsWith('.ts')) out.push(p)
  }
  return out
}

describe('layering: src/lib and the CLI adapter', () => {
  it('no file under src/lib or src/bin imports @oclif/* or src/cli/', async () => {
    const files = await sources(path.join(REPO_ROOT, 'src', 'lib'))
    expect(files.length).to.be.greaterThan(50)
    const bin = await sources(path.join(REPO_ROOT, 'src', 'bin'))
    expect(bin.map((f) => path.basename(f))).to.include('wrapper-server.ts')
    files.push(...bin)
    const offending: string[] = []
    for (const file of files) {
      const text = await readFile(file, 'utf8')
      for (const m of text.matchAll(/(?:from\s+|import\s*\(\s*)'([^']+)'/g)) {
        const spec = m[1]!
        const target = spec.startsWith('.') ? path.resolve(path.dirname(file), spec) : spec
        if (spec.startsWith('@oclif/') || target.startsWith(path.join(REPO_ROOT, 'src', 'cli') + path.sep)) offending.push(`${path.relative(REPO_ROOT, file)}: ${spec}`)
      }
    }
    expect(offending).to.deep.equal([])
  })

  // docs/architecture.md: src/lib/pods/model/ is the pure part of the pod runtime.
  it('src/lib/pods/model/ imports at run time nothing but itself and pure helpers (no Kubernetes client, cluster/, runtime/, admin/ or telemetry)', async () => {
    const model = path.join(REPO_ROOT, 'src', 'lib', 'pods', 'model')
    const files = await sources(model)
    expect(files.map((f) => path.basename(f))).to.include.members(['naming.ts', 'gc.ts', 'template.ts', 'pod-security.ts', 'slot.ts', 'events.ts'])
    const allowed = new Set(['node:crypto', 'node:os', 'yaml', 'src/lib/errors.js', 'src/lib/config/canonical-json.js', 'src/lib/registry/image-config.js'])
    const offending: string[] = []
    for (const file of files) {
      const text = await readFile(file, 'utf8')
      for (const m of text.matchAll(/^import\s+(?!type\b)[^;']*?from\s+'([^']+)'/gm)) {
        const spec = m[1]!
        const target = spec.startsWith('.') ? path.relative(REPO_ROOT, path.resolve(path.dirname(file), spec)) : spec
        if (!target.startsWith('src/lib/pods/model/') && !allowed.has(target)) offending.push(`${path.relative(REPO_ROOT, file)}: ${spec}`)
      }
    }
    expect(offending).to.deep.equal([])
  })
})

