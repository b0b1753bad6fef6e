/**
 * The fair-admission scenarios of docs/limits.md, run against any runner (fnr serve, Porch's func/server) by the
 * integration spec test/grpc/fairness.test.ts and the bench bench/fairness.ts: calls that hang
 * without a deadline, a burst from one client, Porch's one connection with hung and normal calls
 * mixed. Each scenario records what the other client saw (its wait, its code) and the order in
 * which calls ended; none decides anything by the clock (the waits are recorded, not asserted).
 *
 * The functions are shell scripts in one functions dir, mapped in one config.yaml that both
 * runners read (exec runtime only). Function processes write their pid to a file of the bed, so
 * that a scenario knows when they run and can check that none is left.
 */
import {setMaxListeners} from 'node:events'
import {existsSync, readFileSync} from 'node:fs'
import {mkdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'

import type * as grpc from '@grpc/grpc-js'
import {stringify} from 'yaml'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {writeExecutable} from './tmp.js'

export interface FairnessBed {
  functionsDir: string
  configPath: string
  pidsFile: string
}

export const IMAGES = {
  /** Reads its input, then sleeps for good (one process: sleep is exec'd). */
  hang: 'example.com/hang:v1',
  /** Like hang, with a second process in its group (a background sleep). */
  hangTree: 'example.com/hang-tree:v1',
  /** Echoes its input after 3 s asleep (records its pid first). */
  slow: 'example.com/slow:v1',
  /** Echoes its input after 1 s of a busy loop (a child shell, under timeout). */
  busy: 'example.com/busy:v1',
  /** Echoes its input. */
  cat: 'example.com/cat:v1',
} as const

/** A functions dir and config.yaml with the scenarios' functions. */
export async function fairnessBed(dir: string): Promise<FairnessBed> {
  const functionsDir = path.join(dir, 'functions')
  const pidsFile = path.join(dir, 'pids')
  await mkdir(functionsDir, {recursive: true})
  await writeFile(pidsFile, '')
  const scripts: Record<string, string> = {
    hang: `#!/bin/sh\necho $$ >> '${pidsFile}'\ncat >/dev/null\nexec sleep 100000\n`,
    'hang-tree': `#!/bin/sh\nsleep 100000 &\necho $! >> '${pidsFile}'\necho $$ >> '${pidsFile}'\ncat >/dev/null\nwait\n`,
    slow: `#!/bin/sh\necho $$ >> '${pidsFile}'\nin=$(cat)\nsleep 3\nprintf '%s\\n' "$in"\n`,
    busy: `#!/bin/sh\nin=$(cat)\necho $$ >> '${pidsFile}'\ntimeout --foreground 1 sh -c 'while :; do :; done'\nprintf '%s\\n' "$in"\n`,
    cat: '#!/bin/sh\nexec cat\n',
  }
  const entries = []
  for (const [name, script] of Object.entries(scripts)) {
    await writeExecutable(path.join(functionsDir, name), script)
    entries.push({function: name, images: [`example.com/${name}:v1`]})
  }
  const configPath = path.join(dir, 'config.yaml')
  await writeFile(configPath, stringify({functions: entries}))
  return {functionsDir, configPath, pidsFile}
}

export const INPUT = Buffer.from('apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: cm\n')

/** A client on a connection of its own (grpc-js would otherwise share one between clients). */
export function connection(address: string): EvaluatorClient {
  return new EvaluatorClient(address, {channelOptions: {'grpc.use_local_subchannel_pool': 1}})
}

export interface CallRecord {
  /** ms from the scenario's start to the answer. */
  endedAt: number
  ms: number
  code: string
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** One call, recorded: its code name ('OK', 'DEADLINE_EXCEEDED', …) and how long it took. */
async function timed(client: EvaluatorClient, image: string, t0: number, options: {deadline?: number; signal?: AbortSignal} = {}): Promise<CallRecord> {
  const started = performance.now()
  try {
    await client.evaluateRaw(image, INPUT, options)
    return {endedAt: performance.now() - t0, ms: performance.now() - started, code: 'OK'}
  } catch (err) {
    const code = (err as grpc.ServiceError).code
    return {endedAt: performance.now() - t0, ms: performance.now() - started, code: CODE_NAMES[code] ?? String(code)}
  }
}

const CODE_NAMES: Record<number, string> = {0: 'OK', 1: 'CANCELLED', 2: 'UNKNOWN', 4: 'DEADLINE_EXCEEDED', 5: 'NOT_FOUND', 8: 'RESOURCE_EXHAUSTED', 13: 'INTERNAL', 14: 'UNAVAILABLE'}

export async function pidsOf(bed: FairnessBed): Promise<number[]> {
  return (await readFile(bed.pidsFile, 'utf8')).split('\n').filter((l) => l.trim() !== '').map(Number)
}

export const alive = (pid: number): boolean => existsSync(`/proc/${pid}`) && !/\) Z /.test(safeStat(pid))

function safeStat(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'latin1')
  } catch {
    return ''
  }
}

/** Waits until `n` pids are in the file (or `ms` passed); returns how many. */
async function waitForPids(bed: FairnessBed, n: number, ms: number): Promise<number> {
  const until = Date.now() + ms
  for (;;) {
    const count = (await pidsOf(bed)).length
    if (count >= n || Date.now() > until) return count
    await sleep(50)
  }
}

/** Waits until none of the bed's function processes is alive (or `ms` passed); returns those left. */
export async function leftProcesses(bed: FairnessBed, ms = 10_000): Promise<number[]> {
  const until = Date.now() + ms
  for (;;) {
    const left = (await pidsOf(bed)).filter(alive)
    if (left.length === 0 || Date.now() > until) return left
    await sleep(100)
  }
}

export interface HungResult {
  /** Hung calls whose function had started when B called. */
  hungStarted: number
  /** Hung calls that had ended (any way) when B's answer came. */
  hungEndedBeforeB: number
  b: CallRecord
  /** Function processes left 10 s after the hung calls were cancelled. */
  left: number[]
}

/**
 * (a) Client A sends `hung` calls to a function that never exits, without a deadline, on one
 * connection; once they run, client B (a connection of its own, `bAddress`) sends a normal call with
 * a deadline of `bDeadlineMs`. Then A cancels its calls.
 */
export async function hungThenOther(bed: FairnessBed, address: string, opts: {hung: number; bDeadlineMs: number; bAddress?: string}): Promise<HungResult> {
  await writeFile(bed.pidsFile, '')
  const a = connection(address)
  const b = connection(opts.bAddress ?? address)
  const t0 = performance.now()
  const cancel = new AbortController()
  setMaxListeners(0, cancel.signal)
  let ended = 0
  const hung = Array.from({length: opts.hung}, () => timed(a, IMAGES.hang, t0, {signal: cancel.signal}).then((r) => (ended++, r)))
  // All of them, or as many as the runner lets start (a few seconds after the first sixteen).
  const first = await waitForPids(bed, Math.min(opts.hung, 16), 30_000)
  const hungStarted = first >= opts.hung ? first : await waitForPids(bed, opts.hung, 3_000)
  const rb = await timed(b, IMAGES.cat, t0, {deadline: Date.now() + opts.bDeadlineMs})
  const hungEndedBeforeB = ended
  cancel.abort()
  await Promise.all(hung)
  const left = await leftProcesses(bed)
  a.close()
  b.close()
  return {hungStarted, hungEndedBeforeB, b: rb, left}
}

export interface BurstResult {
  /** A's calls that had ended when B's answer came. */
  aEndedBeforeB: number
  aCalls: CallRecord[]
  b: CallRecord
  /** When A's burst had drained (ms from the start). */
  aDrainedAt: number
}

/**
 * (b) Client A sends a burst of `calls` calls to `image` over `connections` connections (no
 * deadline); once `runningBeforeB` of them run (their pids are in the file; 0: at once), client B
 * (`bAddress`, another client) sends a normal call. Records the order in which they ended.
 */
export async function burstThenOther(
  bed: FairnessBed,
  address: string,
  opts: {calls: number; connections: number; image: string; runningBeforeB: number; bAddress: string; waitMs?: number},
): Promise<BurstResult> {
  await writeFile(bed.pidsFile, '')
  const clients = Array.from({length: opts.connections}, () => connection(address))
  const b = connection(opts.bAddress)
  const t0 = performance.now()
  let ended = 0
  const burst = Array.from({length: opts.calls}, (_, i) => timed(clients[i % clients.length]!, opts.image, t0).then((r) => (ended++, r)))
  if (opts.runningBeforeB > 0) await waitForPids(bed, opts.runningBeforeB, 30_000)
  else await sleep(opts.waitMs ?? 500)
  const rb = await timed(b, IMAGES.cat, t0)
  const aEndedBeforeB = ended
  const aCalls = await Promise.all(burst)
  for (const c of clients) c.close()
  b.close()
  return {aEndedBeforeB, aCalls, b: rb, aDrainedAt: Math.max(...aCalls.map((c) => c.endedAt))}
}

export interface PorchPatternResult {
  normal: CallRecord[]
  /** Normal calls that had not answered after capMs (cancelled then). */
  normalStuck: number
  hungStarted: number
  left: number[]
}

/**
 * (c) Porch's pattern: one connection, no deadlines, `hung` calls that never end mixed with
 * `normal` calls (one normal after every few hung). Waits for the normal calls (at most capMs),
 * then cancels everything.
 */
export async function porchPattern(bed: FairnessBed, address: string, opts: {hung: number; normal: number; capMs: number}): Promise<PorchPatternResult> {
  await writeFile(bed.pidsFile, '')
  const conn = connection(address)
  const t0 = performance.now()
  const cancel = new AbortController()
  setMaxListeners(0, cancel.signal)
  const hung: Array<Promise<CallRecord>> = []
  const normal: Array<Promise<CallRecord>> = []
  const every = Math.max(1, Math.floor(opts.hung / opts.normal))
  for (let i = 0; i < opts.hung; i++) {
    hung.push(timed(conn, IMAGES.hang, t0, {signal: cancel.signal}))
    if ((i + 1) % every === 0 && normal.length < opts.normal) normal.push(timed(conn, IMAGES.cat, t0, {signal: cancel.signal}))
  }
  while (normal.length < opts.normal) normal.push(timed(conn, IMAGES.cat, t0, {signal: cancel.signal}))
  let stuck = opts.normal
  const all = Promise.all(normal).then((r) => ((stuck = 0), r))
  await Promise.race([all, sleep(opts.capMs)])
  // The last hung call may have been admitted just before the last normal call answered: its shell
  // writes its pid a moment after it starts.
  const hungStarted = await waitForPids(bed, opts.hung, 5_000)
  cancel.abort()
  const records = await Promise.all(normal)
  if (stuck > 0) stuck = records.filter((r) => r.code === 'CANCELLED').length
  await Promise.all(hung)
  const left = await leftProcesses(bed)
  conn.close()
  return {normal: records, normalStuck: stuck, hungStarted, left}
}

export interface LimitResult {
  code: string
  message: string
  pids: number[]
  left: number[]
}

/** (d) One call to a function that never ends (two processes in its group), no deadline. */
export async function hungWithoutDeadline(bed: FairnessBed, address: string): Promise<LimitResult> {
  await writeFile(bed.pidsFile, '')
  const conn = connection(address)
  let code = 'OK'
  let message = ''
  try {
    await conn.evaluateRaw(IMAGES.hangTree, INPUT)
  } catch (err) {
    const e = err as grpc.ServiceError
    code = CODE_NAMES[e.code] ?? String(e.code)
    message = e.details
  }
  conn.close()
  const pids = await pidsOf(bed)
  return {code, message, pids, left: await leftProcesses(bed, 5_000)}
}

export const round1 = (n: number): number => Math.round(n * 10) / 10
