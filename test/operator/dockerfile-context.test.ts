/**
 * docker/*.Dockerfile and .dockerignore read as text (no engine, no build): what the context keeps,
 * every context COPY source, the final stage's user. The build and the serve from the assembled
 * image are in ./dockerfile.test.ts; both read the Dockerfiles with ../support/dockerfile.ts.
 */
import {readFile, readdir} from 'node:fs/promises'
import path from 'node:path'

import {expect} from 'chai'

import {copies, dockerignore, ignoredBy, parseDockerfile} from '../support/dockerfile.js'
import {REPO_ROOT} from '../support/serve.js'

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
