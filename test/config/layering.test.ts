import {expect} from 'chai'
import {readdirSync, readFileSync} from 'node:fs'
import path from 'node:path'
import {fileURLToPath} from 'node:url'

const SRC_LIB = fileURLToPath(new URL('../../src/lib/', import.meta.url))

function tsFiles(dir: string): string[] {
  return readdirSync(dir, {withFileTypes: true}).flatMap((e) => (e.isDirectory() ? tsFiles(path.join(dir, e.name)) : e.name.endsWith('.ts') ? [path.join(dir, e.name)] : []))
}

/** Every relative module a file names: static imports and re-exports (type-only too) and dynamic import() / import() types. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8')
  const specs = [...text.matchAll(/\bfrom\s+'(\.[^']+)'/g), ...text.matchAll(/\bimport\(\s*'(\.[^']+)'\s*\)/g)].map((m) => m[1]!)
  return specs.map((s) => path.relative(SRC_LIB, path.resolve(path.dirname(file), s)))
}

describe('layering: lib/config and lib/pods', () => {
  it('lib/config imports nothing of lib/pods (the pods read config, never the other way), so the two folders have no cycle', () => {
    const config = tsFiles(path.join(SRC_LIB, 'config'))
    expect(config.length).to.be.greaterThan(5)
    const intoPods = config.flatMap((f) => importsOf(f).filter((m) => m.startsWith('pods/')).map((m) => `${path.relative(SRC_LIB, f)} -> ${m}`))
    expect(intoPods).to.deep.equal([])
    // The checker sees the other direction, so it would see this one.
    const podsIntoConfig = tsFiles(path.join(SRC_LIB, 'pods')).flatMap((f) => importsOf(f).filter((m) => m.startsWith('config/')))
    expect(podsIntoConfig.length).to.be.greaterThan(0)
  })
})
