/**
 * docker/*.Dockerfile and .dockerignore read as text (no engine, no build): what the context keeps,
 * every context COPY source, the final stage's user. The build and the serve from the assembled
 * image are in ./dockerfile.test.ts (whose parsing helpers these are).
 */
import {readFile, readdir} from 'node:fs/promises'
import path from 'node:path'

import {expect} from 'chai'

import {REPO_ROOT} from '../support/serve.js'

interface Instruction {
  op: string
  args: string
}

interface Stage {
  name: string
  instructions: Instruction[]
}

/** Stages of a Dockerfile (continuation lines joined, comments dropped). */
function parseDockerfile(text: string): Stage[] {
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

interface Copy {
  from?: string
  sources: string[]
  dest: string
}

function copies(stage: Stage): Copy[] {
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
function ignoredBy(patterns: string[], rel: string): boolean {
  return patterns.some((p) => {
    if (p.includes('*')) {
      const re = new RegExp(`^${p.split('**/').map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*')).join('(?:.*/)?')}$`)
      return re.test(rel)
    }
    return rel === p || rel.startsWith(`${p}/`)
  })
}

async function dockerignore(): Promise<string[]> {
  const text = await readFile(path.join(REPO_ROOT, '.dockerignore'), 'utf8')
  return text.split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'))
}

describe('docker/ Dockerfiles (read as text)', () => {
  let patterns: string[]

  before(async () => {
    patterns = await dockerignore()
  })

  it('.dockerignore keeps tests, benchmarks, function test cases and local build output out of the context', () => {
    for (const rel of ['test/lib/errors.test.ts', 'bench/run.ts', 'functions/testdata/set-namespace', 'node_modules/yaml', 'dist/commands', '.git/HEAD', 'x/debug.log']) {
      expect(ignoredBy(patterns, rel), rel).to.equal(true)
    }
    for (const rel of ['src/lib/serve.ts', 'functions/set-namespace', 'functions/config.yaml', 'package-lock.json', 'proto/evaluator.proto', 'scripts/package-wrapper.mjs']) {
      expect(ignoredBy(patterns, rel), rel).to.equal(false)
    }
  })

  for (const file of ['fnr.Dockerfile', 'wrapper-server.Dockerfile']) {
    it(`${file}: every context COPY source exists and is not ignored; the image runs as a non-root user`, async () => {
      const stages = parseDockerfile(await readFile(path.join(REPO_ROOT, 'docker', file), 'utf8'))
      expect(stages.length, 'stages').to.be.greaterThan(1)
      for (const stage of stages) {
        for (const c of copies(stage)) {
          if (c.from) {
            expect(stages.map((s) => s.name), `COPY --from=${c.from}`).to.include(c.from)
            continue
          }
          for (const source of c.sources) {
            await readdir(path.join(REPO_ROOT, source)).catch(async () => readFile(path.join(REPO_ROOT, source)))
            expect(ignoredBy(patterns, source), `${source} is in .dockerignore`).to.equal(false)
          }
        }
      }
      const user = stages.at(-1)!.instructions.filter((i) => i.op === 'USER').at(-1)?.args
      expect(user, 'USER of the final stage').to.match(/^[1-9]\d*(:[1-9]\d*)?$/)
    })
  }
})
