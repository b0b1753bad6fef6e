/**
 * Comments cite only what a reader of this repository can open. The source files under src/, test/, bench/,
 * scripts/ and bin/, and the pages of docs/, are read as text and three kinds of citation are
 * refused:
 *
 * - "issue <number>" (also "issues 15 and 16", "issue #9"): the project's tracker is not in the
 *   repo, so no reader can follow it. An upstream issue is cited by its URL, and a URL never
 *   matches: there the word is followed by a "/" (`…/issues/1234`), not by a space.
 * - "§" followed by a number ("spec §4.6", "upstream bug §10.19"): a section of a document that is
 *   not in the repo. Headings in docs/ are cited by their title instead.
 * - a name ending in ".md" that is no file: it is looked up relative to the repo root, to docs/
 *   and to the citing file's own directory. Names inside a URL (`https://…/x.md`) are skipped, as
 *   they point outside the repo on purpose.
 *
 * The whole text is read, not only comments: a test's title that says "(issue 14 item 7)" sends
 * the reader to the same place a comment would. Nothing in these three shapes is legitimate code.
 */
import {existsSync, readdirSync, readFileSync, statSync} from 'node:fs'
import path from 'node:path'

import {expect} from 'chai'

import {REPO_ROOT} from '../support/serve.js'

const ROOTS = ['src', 'test', 'bench', 'scripts', 'bin']
const SOURCE = /\.(?:[cm]?[jt]s|sh)$/
/** docs/ is read too (its Markdown pages); docs.test.ts checks its links, this the plain-text mentions. */
const DOCS = /\.md$/

/**
 * Files another branch rewrites at the same time (the Porch side-by-side suites); remove a name
 * once that branch has landed. Kept apart so that the rule itself has no exception.
 */

function filesUnder(dir: string, kind: RegExp): string[] {
  const out: string[] = []
  for (const name of readdirSync(path.join(REPO_ROOT, dir))) {
    const rel = `${dir}/${name}`
    if (name === 'node_modules' || name.startsWith('.')) continue
    const stat = statSync(path.join(REPO_ROOT, rel))
    if (stat.isDirectory()) out.push(...filesUnder(rel, kind))
    else if (kind.test(name)) out.push(rel)
  }
  return out
}

/** The citations in one file's text that a reader cannot follow, as `file:line: what`. */
export function unfollowable(file: string, text: string, exists: (rel: string) => boolean): string[] {
  const found: string[] = []
  text.split('\n').forEach((line, i) => {
    const at = `${file}:${i + 1}`
    for (const m of line.matchAll(/\bissues?\s+#?\d+/gi)) found.push(`${at}: "${m[0]}"`)
    for (const m of line.matchAll(/§\s*\d+(?:\.\d+)*/g)) found.push(`${at}: "${m[0]}"`)
    for (const m of line.matchAll(/[\w./-]*[\w-]\.md\b/g)) {
      if (/[a-z][a-z0-9+.-]*:\/\/\S*$/i.test(line.slice(0, m.index + m[0].length))) continue
      const name = m[0].replace(/^\.\//, '')
      const candidates = [name, `docs/${name}`, path.posix.join(path.posix.dirname(file), name)]
      if (!candidates.some((c) => exists(path.posix.normalize(c)))) found.push(`${at}: "${m[0]}" (no such file)`)
    }
  })
  return found
}

describe('comments cite what exists', () => {
  it('finds the three shapes and lets URLs and existing pages through', () => {
    const exists = (rel: string) => rel === 'docs/process.md' || rel === 'README.md'
    const text = [
      '// (issue 16 item 4) and issues 15 and 16, issue #9',
      '// spec §4.6 and upstream bug §10.19',
      '// porch-function-runner.md and docs/design.md',
      '// docs/process.md, process.md, ./README.md',
      '// https://github.com/kptdev/kpt/issues/4012 and https://example.com/a/notes.md',
      '// a tissue 3 cm, "issues" alone, § alone',
    ].join('\n')
    expect(unfollowable('src/x.ts', text, exists)).to.deep.equal([
      'src/x.ts:1: "issue 16"',
      'src/x.ts:1: "issues 15"',
      'src/x.ts:1: "issue #9"',
      'src/x.ts:2: "§4.6"',
      'src/x.ts:2: "§10.19"',
      'src/x.ts:3: "porch-function-runner.md" (no such file)',
      'src/x.ts:3: "docs/design.md" (no such file)',
    ])
  })

  it('no source file or docs/ page cites an issue number, a "§" section or a missing .md document', () => {
    const exists = (rel: string) => existsSync(path.join(REPO_ROOT, rel))
    const found = ROOTS.filter((r) => existsSync(path.join(REPO_ROOT, r)))
      .flatMap((r) => filesUnder(r, SOURCE))
      .concat(filesUnder('docs', DOCS))
      .filter((f) => f !== 'test/lib/citations.test.ts')
      .flatMap((f) => unfollowable(f, readFileSync(path.join(REPO_ROOT, f), 'utf8'), exists))
    expect(found).to.deep.equal([])
  })
})
