/**
 * The documentation stays true to the code: docs/commands.md is what scripts/gen-docs.mjs writes
 * from oclif.manifest.json (the commands' flag definitions), README.md stays a front door, and
 * every relative link in README.md and docs/ points at a file, and a heading, that exist.
 */
import {existsSync, readdirSync, readFileSync} from 'node:fs'
import path from 'node:path'

import {expect} from 'chai'

import {anchor, COMMANDS_DOC, readManifest, renderCommandsDoc} from '../scripts/gen-docs.mjs'
import {REPO_ROOT} from './support/serve.js'

/**
 * Guides that other work in progress adds (linked from README.md and docs/README.md ahead of
 * time). A link to one of them is checked once the file exists; remove a name once it is there.
 */
const PLANNED = new Set<string>()

const markdownIn = (dir: string): string[] => readdirSync(path.join(REPO_ROOT, dir)).filter((f) => f.endsWith('.md')).map((f) => `${dir}/${f}`)
const DOC_FILES = ['README.md', ...markdownIn('docs'), ...markdownIn('docs/decisions')]

/** The anchors of a Markdown file's headings, as GitHub makes them (a repeated one gets -1, -2, …). */
function anchorsOf(file: string): Set<string> {
  const seen = new Map<string, number>()
  const out = new Set<string>()
  let fenced = false
  for (const line of readFileSync(path.join(REPO_ROOT, file), 'utf8').split('\n')) {
    if (/^```/.test(line)) fenced = !fenced
    const m = !fenced && /^#{1,6} (.*)$/.exec(line)
    if (!m) continue
    const base = anchor(m[1]!)
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    out.add(n === 0 ? base : `${base}-${n}`)
  }
  return out
}

/** Relative links of a Markdown file outside code: [text](target). */
function linksOf(file: string): string[] {
  const text = readFileSync(path.join(REPO_ROOT, file), 'utf8').replace(/```[\s\S]*?```/g, '').replace(/`[^`\n]*`/g, '``')
  return [...text.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!).filter((t) => !/^[a-z]+:/i.test(t))
}

describe('documentation', () => {
  it('docs/commands.md is generated from the current oclif.manifest.json (run `npm run docs` after changing a command)', () => {
    const current = readFileSync(COMMANDS_DOC, 'utf8')
    expect(current === renderCommandsDoc(readManifest()), 'docs/commands.md is not current: run `npm run docs`').to.equal(true)
  })

  it('the generated reference documents every flag of every command, with its default', () => {
    const manifest = readManifest() as {commands: Record<string, {flags: Record<string, {name: string; hidden?: boolean; default?: unknown}>}>}
    const doc = readFileSync(COMMANDS_DOC, 'utf8')
    const serve = doc.slice(doc.indexOf('## `fnr serve`'), doc.indexOf('## `fnr eval`'))
    for (const flag of Object.values(manifest.commands['serve']!.flags)) {
      if (flag.hidden) continue
      expect(serve, `--${flag.name}`).to.match(new RegExp(`\\| \`--${flag.name}[ \`]`))
    }
    expect(serve).to.contain('| `--port <value>` | `9445` |')
    expect(serve).to.contain('| `--pod-address service\\|pod-ip` | `service` |')
  })

  it('README.md is a front door (at most 250 lines) and links the reference in docs/', () => {
    const readme = readFileSync(path.join(REPO_ROOT, 'README.md'), 'utf8')
    expect(readme.split('\n').length).to.be.at.most(250)
    for (const page of ['docs/README.md', 'docs/commands.md', 'docs/architecture.md', 'docs/contributing.md', 'docs/deploying.md']) expect(readme).to.contain(`](${page}`)
  })

  it('every relative link in README.md and docs/ points at a file and heading that exist', () => {
    const broken: string[] = []
    for (const file of DOC_FILES) {
      for (const link of linksOf(file)) {
        const [target, hash] = link.split('#') as [string, string | undefined]
        const resolved = target === '' ? file : path.posix.normalize(path.posix.join(path.posix.dirname(file), target))
        if (PLANNED.has(resolved) && !existsSync(path.join(REPO_ROOT, resolved))) continue
        if (!existsSync(path.join(REPO_ROOT, resolved))) {
          broken.push(`${file}: ${link} (no file ${resolved})`)
          continue
        }
        if (hash && resolved.endsWith('.md') && !anchorsOf(resolved).has(hash)) broken.push(`${file}: ${link} (no heading #${hash} in ${resolved})`)
      }
    }
    expect(broken).to.deep.equal([])
  })
})
