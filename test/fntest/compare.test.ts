import {expect} from 'chai'
import {mkdir, symlink, writeFile} from 'node:fs/promises'
import path from 'node:path'

import fc from 'fast-check'

import {applyTreePatch, diffTrees, makeTreePatch, PatchError, readTree, type Tree} from '../../src/lib/fntest/compare.js'
import {junitXml, xmlAttr, xmlText} from '../../src/lib/fntest/junit.js'
import type {FnTestRun} from '../../src/lib/fntest/run.js'
import {sanitizeConsole} from '../../src/lib/fntest/run.js'
import {TempDirs} from '../support/tmp.js'
import {findAll, parseXml} from './xml.js'

const tree = (o: Record<string, string>): Tree => new Map(Object.entries(o))

describe('fnr test: comparing packages', () => {
  const temp = new TempDirs()
  after(() => temp.cleanup())

  it('makes a git-style patch that applies back: changed, new, deleted files, missing final newline', () => {
    const before = tree({'a.yaml': 'x: 1\ny: 2\n', 'gone.yaml': 'z: 1\n', 'sub/keep.yaml': 'k: v\n', 'nonl.yaml': 'a: 1'})
    const after = tree({'a.yaml': 'x: 1\ny: 3\n', 'new/b.yaml': 'n: 1\n', 'sub/keep.yaml': 'k: v\n', 'nonl.yaml': 'a: 2'})
    const patch = makeTreePatch(before, after)
    expect(patch).to.contain('diff --git a/a.yaml b/a.yaml\n--- a/a.yaml\n+++ b/a.yaml\n@@ -1,2 +1,2 @@\n x: 1\n-y: 2\n+y: 3\n')
    expect(patch).to.contain('diff --git a/gone.yaml b/gone.yaml\ndeleted file mode 100644\n--- a/gone.yaml\n+++ /dev/null\n')
    expect(patch).to.contain('diff --git a/new/b.yaml b/new/b.yaml\nnew file mode 100644\n--- /dev/null\n+++ b/new/b.yaml\n@@ -0,0 +1,1 @@\n+n: 1\n')
    expect(patch).to.contain('\\ No newline at end of file')
    expect(patch).not.to.contain('keep.yaml')
    expect([...applyTreePatch(before, patch)]).to.deep.equal([...after].sort(([a], [b]) => (a < b ? -1 : 1)))
    expect(makeTreePatch(before, before)).to.equal('')
    expect(applyTreePatch(before, '')).to.deep.equal(before)
  })

  it("applies git's rename-only sections (rename from / rename to, no hunks) as git apply does, quoted paths included", () => {
    const before = tree({Kptfile: 'kind: Kptfile\n', 'resources.yaml': 'a: 1\n', 'x y.yaml': 'q: 1\n'})
    const patch = [
      'diff --git a/Kptfile b/kptfile_example.yaml',
      'similarity index 100%',
      'rename from Kptfile',
      'rename to kptfile_example.yaml',
      'diff --git "a/x y.yaml" "b/d\\303\\251.yaml"',
      'similarity index 100%',
      'rename from "x y.yaml"',
      'rename to "d\\303\\251.yaml"',
      'diff --git a/resources.yaml b/resources.yaml',
      '--- a/resources.yaml',
      '+++ b/resources.yaml',
      '@@ -1 +1 @@',
      '-a: 1',
      '+a: 2',
      '',
    ].join('\n')
    expect(Object.fromEntries(applyTreePatch(before, patch))).to.deep.equal({'dé.yaml': 'q: 1\n', 'kptfile_example.yaml': 'kind: Kptfile\n', 'resources.yaml': 'a: 2\n'})
    expect(() => applyTreePatch(tree({}), patch)).to.throw(PatchError, /Kptfile: renamed by the patch, but the input has no such file/)
  })

  it('round-trips any change of a small tree (property)', () => {
    const files = fc.dictionary(fc.constantFrom('a.yaml', 'b.yaml', 'd/c.yaml', 'd/e/f.yaml'), fc.array(fc.constantFrom('k: v', 'x: 1', '- a', '', '  y: 2'), {maxLength: 8}).map((l) => l.join('\n')))
    fc.assert(
      fc.property(files, files, (a, b) => {
        const before = tree(a)
        const after = tree(b)
        const applied = applyTreePatch(before, makeTreePatch(before, after))
        expect(Object.fromEntries(applied)).to.deep.equal(b)
      }),
      {numRuns: 200},
    )
  })

  it('says which file a stale patch does not apply to', () => {
    const patch = makeTreePatch(tree({'a.yaml': 'x: 1\n'}), tree({'a.yaml': 'x: 2\n'}))
    expect(() => applyTreePatch(tree({'a.yaml': 'x: 5\n'}), patch)).to.throw(PatchError, 'a.yaml: the patch does not apply to the input')
    expect(() => applyTreePatch(tree({}), patch)).to.throw(PatchError, 'a.yaml: the input has no such file')
    const create = makeTreePatch(tree({}), tree({'n.yaml': 'a\n'}))
    expect(() => applyTreePatch(tree({'n.yaml': 'a\n'}), create)).to.throw(PatchError, 'n.yaml: created by the patch but already in the input')
  })

  it('shows differing files as unified diffs of expected/ and actual/', () => {
    const d = diffTrees(tree({'a.yaml': 'x: 1\n', 'only-expected.yaml': 'e\n'}), tree({'a.yaml': 'x: 2\n', 'only-actual.yaml': 'n\n'}))
    expect(d).to.contain('--- expected/a.yaml\n+++ actual/a.yaml\n@@ -1,1 +1,1 @@\n-x: 1\n+x: 2\n')
    expect(d).to.contain('--- /dev/null\n+++ actual/only-actual.yaml\n')
    expect(d).to.contain('--- expected/only-expected.yaml\n+++ /dev/null\n')
  })

  it('reads a package tree with hidden files and symbolic links, skipping nothing else', async () => {
    const dir = await temp.make('fnr-tree-')
    await mkdir(path.join(dir, 'sub'))
    await writeFile(path.join(dir, 'sub', 'a.yaml'), 'a: 1\n')
    await writeFile(path.join(dir, '.krmignore'), 'x\n')
    await symlink('sub/a.yaml', path.join(dir, 'link.yaml'))
    expect(Object.fromEntries(await readTree(dir))).to.deep.equal({'.krmignore': 'x\n', 'link.yaml': '-> sub/a.yaml', 'sub/a.yaml': 'a: 1\n'})
  })

  it('sanitises durations in the console output like kpt\'s harness', () => {
    expect(sanitizeConsole('[RUNNING] "fn"\n[PASS] "fn" in 1.2s\n[FAIL] "x y" in 300ms\n')).to.equal('[RUNNING] "fn"\n[PASS] "fn" in 0s\n[FAIL] "x y" in 0s\n')
  })
})

describe('fnr test: JUnit XML', () => {
  it('escapes text and attributes and replaces characters XML cannot carry', () => {
    expect(xmlText('a<b>&c ]]> \u0001\u001b \ud800 ok')).to.equal('a&lt;b&gt;&amp;c ]]&gt; \uFFFD\uFFFD \uFFFD ok')
    expect(xmlAttr('"q" \'s\'\n\tx\r')).to.equal('&quot;q&quot; &apos;s&apos;&#10;&#9;x&#13;')
    expect(xmlText('a\r\nb')).to.equal('a&#13;\nb')
  })

  it('writes a well-formed report whatever the names and messages hold (property)', () => {
    const text = fc.string({unit: 'binary', maxLength: 40})
    fc.assert(
      fc.property(fc.array(fc.record({name: text, message: text, detail: text, failed: fc.boolean()}), {maxLength: 6}), (cases) => {
        const run: FnTestRun = {
          cases: [],
          notRun: 0,
          durationMs: 12,
          results: cases.map((c) => ({
            name: c.name,
            dir: `/x/${c.name}`,
            function: 'fn',
            status: c.failed ? ('failed' as const) : ('passed' as const),
            durationMs: 3,
            exitCode: 0,
            timedOut: false,
            problems: c.failed ? [{message: c.message, detail: c.detail}] : [],
            updated: [],
          })),
        }
        const doc = parseXml(junitXml(run))
        const tcs = findAll(doc, 'testcase')
        expect(tcs).to.have.length(cases.length)
        expect(findAll(doc, 'failure')).to.have.length(cases.filter((c) => c.failed).length)
        tcs.forEach((tc, i) => expect(tc.attrs.name).to.equal(cases[i]!.name.replace(/[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu, '\uFFFD')))
      }),
      {numRuns: 300},
    )
  })
})
