// A package folder as {relative path: text} and back, for specs that compare what fnr and kpt
// leave on disk (test/commands/render.test.ts, render-kptfile.test.ts).
import {existsSync} from 'node:fs'
import {mkdir, readFile, readdir, writeFile} from 'node:fs/promises'
import path from 'node:path'

/** Every file below `dir` (sorted, recursively) with its text; {} when `dir` does not exist. */
export async function tree(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {}
  async function walk(d: string): Promise<void> {
    for (const e of (await readdir(d, {withFileTypes: true})).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const p = path.join(d, e.name)
      if (e.isDirectory()) await walk(p)
      else out[path.relative(dir, p)] = await readFile(p, 'utf8')
    }
  }
  if (existsSync(dir)) await walk(dir)
  return out
}

/** Writes each file of `files` below `dir`, making folders as needed. */
export async function writeTree(dir: string, files: Record<string, string>): Promise<void> {
  for (const [rel, content] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, rel)), {recursive: true})
    await writeFile(path.join(dir, rel), content)
  }
}
