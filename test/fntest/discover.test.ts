/**
 * Finding and reading `fnr test` cases (src/lib/fntest/discover.ts) in a temporary directory: a case
 * is a directory holding .expected/, found under each root in name order, filtered by substring or
 * `*` pattern; a package or resourcelist case, out-of-place with out/, kpt's scripts; and layout
 * problems reported on the case while the others still run. Case configs are in ./config.test.ts.
 */
import {mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {expect} from 'chai'

import {caseName, discoverCases, readCase} from '../../src/lib/fntest/discover.js'
import {failure} from '../support/fnr-error.js'
import {TempDirs} from '../support/tmp.js'

async function files(root: string, tree: Record<string, string>): Promise<void> {
  for (const [rel, content] of Object.entries(tree)) {
    if (rel.endsWith('/')) {
      await mkdir(path.join(root, rel), {recursive: true})
      continue
    }
    await mkdir(path.dirname(path.join(root, rel)), {recursive: true})
    await writeFile(path.join(root, rel), content)
  }
}

describe('fnr test: finding and reading cases', () => {
  const temp = new TempDirs()
  after(() => temp.cleanup())

  /** A new directory holding the files `empty` (empty; a name ending in / is a directory) and `written` (with their content). */
  async function caseRoot(empty: string[], written: Record<string, string> = {}): Promise<string> {
    const root = await temp.make('fnr-cases-')
    await files(root, {...Object.fromEntries(empty.map((rel) => [rel, ''])), ...written})
    return root
  }

  it('a case\'s name: relative to the working directory with slashes, "." for it, the path itself outside it', () => {
    expect(caseName('/work/cases/a/b', '/work')).to.equal('cases/a/b')
    expect(caseName('/work', '/work')).to.equal('.')
    expect(caseName('/elsewhere/c', '/work')).to.equal('/elsewhere/c')
  })

  it('finds every directory holding .expected/ (not below a case, not in hidden directories or node_modules), sorted, filtered', async () => {
    const root = await caseRoot(
      ['b-case', 'a-case', 'a-case/inner', 'group/c-case', '.hidden/d', 'node_modules/e'].map((dir) => `${dir}/.expected/diff.patch`),
      {'not-a-case/file.yaml': 'a: 1\n'},
    )
    const names = async (filter: string[] = []) => (await discoverCases([root], filter)).map((c) => path.relative(root, c.dir))
    expect(await names()).to.deep.equal(['a-case', 'b-case', 'group/c-case'])
    expect(await names(['c-case'])).to.deep.equal(['group/c-case'])
    // a pattern with * matches the whole name (here the absolute path: the root is outside the working directory)
    expect(await names(['*-case'])).to.deep.equal(['a-case', 'b-case', 'group/c-case'])
    expect(await names(['*/group/*'])).to.deep.equal(['group/c-case'])
    expect(await names(['a-', 'b-'])).to.deep.equal(['a-case', 'b-case'])
    expect((await failure(discoverCases([root], ['nothing-like-this']))).message).to.equal('no test case matches --filter "nothing-like-this"')
  })

  it('refuses no root, a root that is not a directory, and a root without cases', async () => {
    const root = await temp.make('fnr-cases-')
    expect((await failure(discoverCases([]))).kind).to.equal('Usage')
    expect((await failure(discoverCases([path.join(root, 'missing')]))).message).to.equal(`${path.join(root, 'missing')}: not a directory of test cases`)
    expect((await failure(discoverCases([root]))).message).to.equal(`${root}: no test cases (directories holding .expected/) found`)
  })

  it('reads a package case (out-of-place with out/, kpt\'s scripts) and a resourcelist case', async () => {
    const root = await caseRoot(['pkg/.expected/diff.patch', 'pkg/.expected/setup.sh', 'pkg/.expected/exec.sh', 'pkg/out/', 'rl/.expected/resourcelist.yaml'], {
      'pkg/cm.yaml': 'a: 1\n',
      'rl/resourcelist.yaml': 'kind: ResourceList\n',
    })
    const pkg = await readCase(path.join(root, 'pkg'), 'pkg')
    expect(pkg).to.deep.include({name: 'pkg', mode: 'package', outOfPlace: true, expectedDir: path.join(root, 'pkg', '.expected')})
    expect(pkg.scripts).to.deep.equal({setup: path.join(root, 'pkg/.expected/setup.sh'), exec: path.join(root, 'pkg/.expected/exec.sh')})
    expect(pkg.config).to.deep.include({exitCode: 0, skip: false})
    const rl = await readCase(path.join(root, 'rl'), 'rl')
    expect(rl).to.deep.include({mode: 'resourcelist', outOfPlace: false})
  })

  it('layout problems name the case; among several cases a broken one is reported and the others still read', async () => {
    const root = await caseRoot(['rl-with-patch/.expected/diff.patch', 'pkg-with-rl/.expected/resourcelist.yaml', 'ok/.expected/diff.patch'], {
      'rl-with-patch/resourcelist.yaml': 'kind: ResourceList\n',
      'pkg-with-rl/cm.yaml': 'a: 1\n',
    })
    expect((await failure(readCase(path.join(root, 'rl-with-patch'), 'x'))).message).to.equal('test case x: .expected/diff.patch is for package cases; a resourcelist.yaml case expects .expected/resourcelist.yaml')
    expect((await failure(readCase(path.join(root, 'pkg-with-rl'), 'y'))).message).to.equal('test case y: .expected/resourcelist.yaml is for cases whose input is resourcelist.yaml alone; a package case expects .expected/diff.patch')
    expect((await failure(readCase(root, 'z'))).message).to.equal('test case z: .expected/ is missing or not a directory')
    const all = await discoverCases([root])
    expect(all.map((c) => [path.basename(c.dir), c.error === undefined])).to.deep.equal([
      ['ok', true],
      ['pkg-with-rl', false],
      ['rl-with-patch', false],
    ])
  })
})
