/**
 * docker/*.Dockerfile and .dockerignore read as text: the parsing helpers shared by
 * test/operator/dockerfile.test.ts and test/operator/dockerfile-context.test.ts.
 */
import {readFile} from 'node:fs/promises'
import path from 'node:path'

import {REPO_ROOT} from './serve.js'

export interface Instruction {
  op: string
  args: string
}

export interface Stage {
  name: string
  instructions: Instruction[]
}

/** Stages of a Dockerfile (continuation lines joined, comments dropped). */
export function parseDockerfile(text: string): Stage[] {
  const lines = text.replace(/\\\n/g, ' ').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'))
  const stages: Stage[] = []
  for (const line of lines) {
    const [, op = '', args = ''] = /^(\S+)\s*(.*)$/.exec(line) ?? []
    const instruction = {op: op.toUpperCase(), args}
    if (instruction.op === 'FROM') stages.push({name: / AS (\S+)$/i.exec(args)?.[1] ?? String(stages.length), instructions: []})
    else if (instruction.op !== 'ARG' || stages.length > 0) stages.at(-1)?.instructions.push(instruction)
  }
  return stages
}

export interface Copy {
  from?: string
  sources: string[]
  dest: string
}

export function copies(stage: Stage): Copy[] {
  return stage.instructions
    .filter((i) => i.op === 'COPY')
    .map((i) => {
      const words = i.args.split(/\s+/)
      const from = words.find((w) => w.startsWith('--from='))?.slice('--from='.length)
      const paths = words.filter((w) => !w.startsWith('--'))
      return {from, sources: paths.slice(0, -1), dest: paths.at(-1)!}
    })
}

/** Whether .dockerignore keeps `rel` (a path relative to the context) out of the context. */
export function ignoredBy(patterns: string[], rel: string): boolean {
  return patterns.some((p) => {
    if (p.includes('*')) {
      const re = new RegExp(`^${p.split('**/').map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*')).join('(?:.*/)?')}$`)
      return re.test(rel)
    }
    return rel === p || rel.startsWith(`${p}/`)
  })
}

export async function dockerignore(): Promise<string[]> {
  const text = await readFile(path.join(REPO_ROOT, '.dockerignore'), 'utf8')
  return text.split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'))
}
