/**
 * `fnr test`: comparing what a function did with what a case expects.
 *
 * Packages are compared as file trees (relative path -> content). The expectation of a package
 * case is kpt's `.expected/diff.patch`: the change from the input package to the package after
 * the function. It is applied to the input (jsdiff's parsePatch/applyPatch, which read the
 * `diff --git` patches git and kpt's harness write, without fuzz) and the result is compared
 * file by file with the real output, so a patch made by `git diff` and one made by fnr compare
 * the same. `makeTreePatch` writes such a patch (git's layout, without `index` lines) for
 * `--update`. Mismatches are shown as unified diffs (jsdiff).
 */
import {lstat, readdir, readFile, readlink} from 'node:fs/promises'
import path from 'node:path'

import {applyPatch, createTwoFilesPatch, FILE_HEADERS_ONLY, formatPatch, parsePatch, structuredPatch} from 'diff'

export type Tree = Map<string, string>

/** Every file under dir, by slash-separated relative path (symbolic links as `-> target`). */
export async function readTree(dir: string, skip: ReadonlySet<string> = new Set()): Promise<Tree> {
  const out: Tree = new Map()
  async function walk(d: string, rel: string): Promise<void> {
    const entries = await readdir(d, {withFileTypes: true})
    for (const e of entries) {
      const r = rel === '' ? e.name : `${rel}/${e.name}`
      if (skip.has(r)) continue
      const p = path.join(d, e.name)
      if (e.isDirectory()) await walk(p, r)
      else if (e.isSymbolicLink()) out.set(r, `-> ${await readlink(p)}`)
      else if ((await lstat(p)).isFile()) out.set(r, await readFile(p, 'utf8'))
    }
  }
  await walk(dir, '')
  return new Map([...out].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
}

function sortedUnion(a: Tree, b: Tree): string[] {
  return [...new Set([...a.keys(), ...b.keys()])].sort()
}

/** A git-style patch from `before` to `after` ('' when they are the same). */
export function makeTreePatch(before: Tree, after: Tree): string {
  let out = ''
  for (const p of sortedUnion(before, after)) {
    const a = before.get(p)
    const b = after.get(p)
    if (a === b) continue
    out += `diff --git a/${p} b/${p}\n`
    if (a === undefined) out += 'new file mode 100644\n'
    if (b === undefined) out += 'deleted file mode 100644\n'
    const patch = structuredPatch(a === undefined ? '/dev/null' : `a/${p}`, b === undefined ? '/dev/null' : `b/${p}`, a ?? '', b ?? '', undefined, undefined, {context: 3})
    out += formatPatch(patch, FILE_HEADERS_ONLY)
  }
  return out
}

export class PatchError extends Error {}

function stripPrefix(name: string | undefined, prefix: string): string | undefined {
  if (name === undefined || name === '/dev/null') return undefined
  return name.startsWith(prefix) ? name.slice(prefix.length) : name
}

/** Applies a patch (git's or makeTreePatch's) to a tree; PatchError when it does not apply. */
export function applyTreePatch(before: Tree, patchText: string): Tree {
  const result: Tree = new Map(before)
  if (patchText.trim() === '') return result
  let patches
  try {
    patches = parsePatch(patchText)
  } catch (err) {
    throw new PatchError(`cannot read the patch: ${(err as Error).message}`)
  }
  // git's rename-only sections ("rename from"/"rename to", no ---/+++ lines and no hunks): the
  // diff library leaves them out, so they are applied here, as `git apply` does.
  for (const {from, to} of gitPureRenames(patchText)) {
    const content = result.get(from)
    if (content === undefined) throw new PatchError(`${from}: renamed by the patch, but the input has no such file`)
    if (result.has(to)) throw new PatchError(`${to}: a rename target the input already has`)
    result.delete(from)
    result.set(to, content)
  }
  for (const p of patches) {
    if (p.oldFileName === undefined && p.newFileName === undefined) {
      if (p.hunks.length === 0) continue
      throw new PatchError('a file section has hunks but no ---/+++ lines')
    }
    const oldName = stripPrefix(p.oldFileName, 'a/')
    const newName = stripPrefix(p.newFileName, 'b/')
    const source = oldName === undefined ? '' : result.get(oldName)
    if (source === undefined) throw new PatchError(`${oldName}: the input has no such file`)
    if (oldName === undefined && newName !== undefined && result.has(newName)) throw new PatchError(`${newName}: created by the patch but already in the input`)
    const patched = applyPatch(source, p)
    if (patched === false) throw new PatchError(`${newName ?? oldName}: the patch does not apply to the input`)
    if (oldName !== undefined) result.delete(oldName)
    if (newName !== undefined) result.set(newName, patched)
    else if (patched !== '') throw new PatchError(`${oldName}: deleted by the patch, but the hunks leave content`)
  }
  return new Map([...result].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
}

/**
 * The renames of a git patch's sections that only rename (a section that also changes the file
 * has ---/+++ lines naming both paths, which the diff library applies). Paths as git writes them:
 * plain, or double-quoted with C escapes.
 */
export function gitPureRenames(patchText: string): Array<{from: string; to: string}> {
  const renames: Array<{from: string; to: string}> = []
  for (const section of patchText.split(/^(?=diff --git )/m)) {
    if (!section.startsWith('diff --git ') || /^--- /m.test(section)) continue
    const from = /^rename from (.+)$/m.exec(section)?.[1]
    const to = /^rename to (.+)$/m.exec(section)?.[1]
    if (from !== undefined && to !== undefined) renames.push({from: gitPath(from), to: gitPath(to)})
  }
  return renames
}

/** A path as git writes it in extended headers: as is, or quoted with C escapes (octal bytes). */
function gitPath(text: string): string {
  if (!text.startsWith('"') || !text.endsWith('"')) return text
  const bytes: number[] = []
  const body = text.slice(1, -1)
  const simple: Record<string, number> = {n: 10, t: 9, '"': 34, '\\': 92, a: 7, b: 8, f: 12, r: 13, v: 11}
  for (let i = 0; i < body.length; i++) {
    const c = body[i]!
    if (c !== '\\') {
      bytes.push(...Buffer.from(c, 'utf8'))
      continue
    }
    const next = body[i + 1] ?? ''
    const octal = /^[0-7]{3}/.exec(body.slice(i + 1))
    if (octal) {
      bytes.push(Number.parseInt(octal[0], 8))
      i += 3
    } else {
      bytes.push(simple[next] ?? next.charCodeAt(0))
      i += 1
    }
  }
  return Buffer.from(bytes).toString('utf8')
}

/** Unified diffs of the files that differ (expected/… vs actual/…), '' when the trees are equal. */
export function diffTrees(expected: Tree, actual: Tree): string {
  let out = ''
  for (const p of sortedUnion(expected, actual)) {
    const e = expected.get(p)
    const a = actual.get(p)
    if (e === a) continue
    out += diffText(e === undefined ? '/dev/null' : `expected/${p}`, a === undefined ? '/dev/null' : `actual/${p}`, e ?? '', a ?? '')
  }
  return out
}

/** A unified diff of two texts with file headers ('' when equal). */
export function diffText(expectedName: string, actualName: string, expected: string, actual: string): string {
  if (expected === actual) return ''
  return createTwoFilesPatch(expectedName, actualName, expected, actual, undefined, undefined, {context: 3, headerOptions: FILE_HEADERS_ONLY}) ?? ''
}
