import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'
import {readFile, rename, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {freePort} from '../support/registry/tools.js'
import {startServeProcess, type ServeProcess} from '../support/serve.js'
import {SAMPLE_RL, TempDirs, writeExecutable} from '../support/tmp.js'
import {scrape} from '../metrics/prom-text.js'

/**
 * Records every run (a line in <binary>.count), writes to stderr, echoes its input. It counts once it
 * has read its input: `fnr serve` starts a process before its call (docs/process.md "Pre-started
 * functions"), and one that never gets a call has not run the function.
 */
const COUNTED = '#!/bin/sh\ncat > "$0.in.$$"\necho run >> "$0.count"\necho "working on it" >&2\ncat "$0.in.$$"\nrm -f "$0.in.$$"\n'
const NAMES = ['counted', 'nocache', 'short', 'big', 'plain'] as const

describe('fnr serve response cache (exec runtime, real child processes)', function () {
  this.timeout(60_000)
  const temp = new TempDirs()
  let dir: string
  let functionsDir: string
  let configPath: string
  let cacheConfigPath: string

  const image = (name: string): string => `example.com/${name}:v1`
  const runs = async (name: string): Promise<number> =>
    (await readFile(path.join(functionsDir, `${name}.count`), 'utf8').catch(() => '')).split('\n').filter((l) => l !== '').length

  before(async () => {
    dir = await temp.make()
    functionsDir = path.join(dir, 'functions')
    const {mkdir} = await import('node:fs/promises')
    await mkdir(functionsDir)
    for (const name of NAMES) await writeExecutable(path.join(functionsDir, name), COUNTED)
    configPath = path.join(dir, 'config.yaml')
    await writeFile(configPath, `functions:\n${NAMES.map((n) => `- function: ${n}\n  images: [${image(n)}]`).join('\n')}\n`)
    cacheConfigPath = path.join(dir, 'pod-cache-config.yaml')
    // Porch's format, plus fnr's per-image switch.
    await writeFile(cacheConfigPath, `- name: ${image('nocache')}\n  timeToLive: 30m\n  responseCache: false\n- name: ${image('short')}\n  responseCache: 300ms\n`)
  })
  after(() => temp.cleanup())

  async function withServe(args: string[], body: (client: EvaluatorClient, serve: ServeProcess, metricsPort: number) => Promise<void>): Promise<void> {
    const metricsPort = await freePort()
    const serve = await startServeProcess(['--disable-runtimes=pod', `--config=${configPath}`, `--functions=${functionsDir}`, `--metrics-port=${metricsPort}`, ...args])
    const client = new EvaluatorClient(`127.0.0.1:${serve.port}`, {maxMessageSize: 16 * 1024 * 1024})
    try {
      await body(client, serve, metricsPort)
    } finally {
      client.close()
      serve.child.kill('SIGTERM')
      await serve.exited
    }
  }

  it('is off by default: every call runs the function', async () => {
    await withServe([], async (client, serve, metricsPort) => {
      const before = await runs('plain')
      await client.evaluateRaw(image('plain'), SAMPLE_RL)
      await client.evaluateRaw(image('plain'), SAMPLE_RL)
      expect((await runs('plain')) - before).to.equal(2)
      const m = await scrape(metricsPort)
      expect(m.has('fnr_response_cache_lookups_total')).to.equal(false)
      expect(m.value('fnr_evaluations_total', {runtime: 'exec', image: image('plain')})).to.equal(2)
      expect(serve.stderr()).not.to.contain('response cache on')
    })
  })

  it('with --cache-ttl: hits return identical bytes and trailers without running the function; misses say why', async () => {
    await withServe(['--cache-ttl=10m', '--cache-max-bytes=1048576', `--pod-cache-config=${cacheConfigPath}`], async (client, serve, metricsPort) => {
      expect(serve.stderr()).to.contain('response cache on')
      const first = await client.evaluateRaw(image('counted'), SAMPLE_RL)
      const second = await client.evaluateRaw(image('counted'), SAMPLE_RL)
      expect(await runs('counted')).to.equal(1)
      expect(second.resourceList.equals(first.resourceList)).to.equal(true)
      expect(second.log.equals(first.log)).to.equal(true)
      expect(second.log.toString()).to.equal('working on it\n')
      expect(second.trailers.getMap()).to.deep.equal(first.trailers.getMap())
      expect(second.trailers.get('fnr-evaluator')).to.deep.equal(['exec'])

      // Another input: a miss.
      const other = Buffer.concat([SAMPLE_RL, Buffer.from('# another package\n')])
      await client.evaluateRaw(image('counted'), other)
      expect(await runs('counted')).to.equal(2)

      // The binary replaced after start-up (a new file renamed over it): never the stored answer of the old
      // file, and not run either: the exec runtime re-checks each binary at call time (docs/process.md).
      const binary = path.join(functionsDir, 'counted')
      await writeExecutable(`${binary}.new`, `${COUNTED}# v2\n`)
      await rename(`${binary}.new`, binary)
      for (let i = 0; i < 2; i++) {
        const refused = await client.evaluateRaw(image('counted'), SAMPLE_RL).then(() => undefined, (err: unknown) => err as {code?: number; details?: string})
        expect(refused?.code, 'a replaced binary is refused').to.equal(grpc.status.FAILED_PRECONDITION)
        expect(refused?.details).to.contain('is not the file it was at start-up')
      }
      expect(await runs('counted')).to.equal(2)

      // Per image: responseCache false never caches; a short per-image TTL expires.
      await client.evaluateRaw(image('nocache'), SAMPLE_RL)
      await client.evaluateRaw(image('nocache'), SAMPLE_RL)
      expect(await runs('nocache')).to.equal(2)
      await client.evaluateRaw(image('short'), SAMPLE_RL)
      await client.evaluateRaw(image('short'), SAMPLE_RL)
      expect(await runs('short')).to.equal(1)
      await sleep(400)
      await client.evaluateRaw(image('short'), SAMPLE_RL)
      expect(await runs('short')).to.equal(2)

      // The size bound: three 400 KiB responses do not fit in 1 MiB; the least recently used goes.
      const big = (c: string): Buffer => Buffer.concat([SAMPLE_RL, Buffer.from(`# ${c.repeat(400 * 1024)}\n`)])
      for (const c of 'abc') await client.evaluateRaw(image('big'), big(c))
      expect(await runs('big')).to.equal(3)
      await client.evaluateRaw(image('big'), big('c'))
      expect(await runs('big')).to.equal(3)
      await client.evaluateRaw(image('big'), big('a'))
      expect(await runs('big')).to.equal(4)

      const m = await scrape(metricsPort)
      const lookups = (labels: Record<string, string>): number => m.value('fnr_response_cache_lookups_total', labels)
      expect(lookups({result: 'hit'})).to.equal(3) // counted, short, big c
      expect(lookups({result: 'miss', reason: 'absent'})).to.equal(3) // counted, short, big a
      expect(lookups({result: 'miss', reason: 'input-changed'})).to.equal(4) // counted other, counted (replaced binary, second try), big b, big c
      expect(lookups({result: 'miss', reason: 'image-changed'})).to.equal(1) // counted (replaced binary, first try)
      expect(lookups({result: 'miss', reason: 'expired'})).to.equal(1)
      expect(lookups({result: 'miss', reason: 'evicted'})).to.equal(1)
      expect(m.value('fnr_response_cache_evictions_total', {reason: 'evict'})).to.be.at.least(1)
      expect(m.value('fnr_response_cache_bytes')).to.be.at.most(1024 * 1024)
      expect(m.value('fnr_response_cache_entries')).to.be.greaterThan(0)
      expect(m.value('fnr_evaluations_total', {runtime: 'cache', image: image('counted'), code: 'OK'})).to.equal(1)
      expect(m.value('fnr_evaluations_total', {runtime: 'exec', image: image('counted'), code: 'OK'})).to.equal(2)
      expect(m.value('fnr_evaluation_duration_seconds_count', {runtime: 'cache'})).to.equal(3) // the three hits
    })
  })
})
