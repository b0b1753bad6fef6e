/**
 * How `fnr serve` and `fnr wrapper-server` stop (src/lib/drain.ts), on a fake server: drain within the
 * grace period, then release, once; the first SIGTERM/SIGINT starts that, a second one forces the
 * stop and exits 1. The signal handlers are called directly (emitting a real SIGTERM in the test
 * process would run mocha's teardown); process.exit is replaced while a test needs it.
 */
import {expect} from 'chai'

import {drainOnStop, type DrainOptions} from '../../src/lib/drain.js'
import type {EvaluatorServer} from '../../src/lib/grpc/server.js'
import {memoryLogger, type LogLine} from '../support/memory-logger.js'

/** A server whose shutdown resolves when the test says (finish) and records what happened, in order. */
function fakeServer(events: string[], activeCalls = 2) {
  let finish!: (r: {forced: boolean}) => void
  const server = {
    activeCalls,
    shutdown: (graceMs: number) => {
      events.push(`shutdown ${graceMs}`)
      return new Promise<{forced: boolean}>((r) => (finish = r))
    },
    forceShutdown: () => void events.push('forceShutdown'),
  }
  return {server: server as unknown as EvaluatorServer, finish: (r: {forced: boolean}) => finish(r)}
}

const tick = (): Promise<void> => new Promise((r) => setImmediate(r))

describe('draining on stop', () => {
  let events: string[]
  let lines: LogLine[]
  let options: DrainOptions

  beforeEach(() => {
    events = []
    lines = []
    options = {
      gracePeriodMs: 5000,
      logger: memoryLogger(lines),
      handleSignals: false,
      release: async () => void events.push('release'),
      drainingFields: {port: 9445},
      launcher: {killAll: () => events.push('killAll')},
    }
  })

  it('stop() drains with the grace period, then releases, then says it stopped; done resolves with the result', async () => {
    const {server, finish} = fakeServer(events)
    const handle = drainOnStop(server, options)
    const stopped = handle.stop()
    await tick()
    expect(events).to.deep.equal(['shutdown 5000'])
    expect(lines).to.deep.equal([{level: 'lifecycle', msg: 'draining', fields: {activeCalls: 2, port: 9445}}])
    finish({forced: true})
    expect(await stopped).to.deep.equal({forced: true})
    expect(await handle.done).to.deep.equal({forced: true})
    expect(events).to.deep.equal(['shutdown 5000', 'release'])
    expect(lines.at(-1)).to.deep.equal({level: 'lifecycle', msg: 'stopped', fields: {forced: true}})
  })

  it('a drain or release that fails ends the stop as forced: logged once, the forced stop\'s work done, no rejection', async () => {
    const server = {activeCalls: 1, shutdown: async () => ({forced: false}), forceShutdown: () => void events.push('forceShutdown')} as unknown as EvaluatorServer
    const handle = drainOnStop(server, {...options, release: async () => Promise.reject(new Error('tracing exporter hung'))})
    expect(await handle.stop()).to.deep.equal({forced: true})
    expect(await handle.done).to.deep.equal({forced: true})
    expect(events).to.deep.equal(['forceShutdown', 'killAll'])
    expect(lines.filter((l) => l.level === 'error')).to.deep.equal([{level: 'error', msg: 'the graceful stop failed: stopping at once', fields: {error: 'tracing exporter hung'}}])
  })

  it('stop() is idempotent: one drain, one release, the same answer', async () => {
    const {server, finish} = fakeServer(events)
    const handle = drainOnStop(server, options)
    const a = handle.stop()
    const b = handle.stop()
    expect(b).to.equal(a)
    finish({forced: false})
    await a
    expect(await handle.stop()).to.deep.equal({forced: false})
    expect(events).to.deep.equal(['shutdown 5000', 'release'])
  })

  it('without drainingFields, the draining line has the active calls only', async () => {
    const {server, finish} = fakeServer(events, 0)
    const handle = drainOnStop(server, {...options, drainingFields: undefined})
    void handle.stop()
    finish({forced: false})
    await handle.done
    expect(lines[0]).to.deep.equal({level: 'lifecycle', msg: 'draining', fields: {activeCalls: 0}})
  })

  it('without handleSignals, adds no signal handler', () => {
    const before = [process.listenerCount('SIGTERM'), process.listenerCount('SIGINT')]
    drainOnStop(fakeServer(events).server, options)
    expect([process.listenerCount('SIGTERM'), process.listenerCount('SIGINT')]).to.deep.equal(before)
  })

  describe('with handleSignals', () => {
    const realExit = process.exit
    let added: Array<['SIGTERM' | 'SIGINT', (signal: NodeJS.Signals) => void]>

    /** Starts the drain with handlers on; returns the handlers it added. */
    function start(server: EvaluatorServer): ReturnType<typeof drainOnStop> {
      const term = process.listeners('SIGTERM')
      const int = process.listeners('SIGINT')
      const handle = drainOnStop(server, {...options, handleSignals: true})
      added = [
        ...process.listeners('SIGTERM').filter((l) => !term.includes(l)).map((l): ['SIGTERM', (s: NodeJS.Signals) => void] => ['SIGTERM', l as (s: NodeJS.Signals) => void]),
        ...process.listeners('SIGINT').filter((l) => !int.includes(l)).map((l): ['SIGINT', (s: NodeJS.Signals) => void] => ['SIGINT', l as (s: NodeJS.Signals) => void]),
      ]
      return handle
    }

    afterEach(() => {
      process.exit = realExit
      for (const [signal, l] of added) process.removeListener(signal, l)
    })

    it('listens to SIGTERM and SIGINT with one handler, which starts the drain and logs the signal', async () => {
      const {server, finish} = fakeServer(events)
      const handle = start(server)
      expect(added.map(([s]) => s)).to.deep.equal(['SIGTERM', 'SIGINT'])
      expect(added[0]![1]).to.equal(added[1]![1])
      added[0]![1]('SIGTERM')
      await tick()
      expect(lines[0]).to.deep.equal({level: 'lifecycle', msg: 'signal received', fields: {signal: 'SIGTERM'}})
      expect(events).to.deep.equal(['shutdown 5000'])
      finish({forced: false})
      expect(await handle.done).to.deep.equal({forced: false})
    })

    it('removes its handlers once stopped', async () => {
      const {server, finish} = fakeServer(events)
      const handle = start(server)
      void handle.stop()
      finish({forced: false})
      await handle.done
      for (const [signal, l] of added) expect(process.listeners(signal), signal).to.not.include(l)
    })

    it('a second signal forces the stop: server shut down, functions killed, exit code 1', async () => {
      const exits: Array<number | string | null | undefined> = []
      process.exit = ((code?: number | string | null) => void exits.push(code)) as typeof process.exit
      const {server, finish} = fakeServer(events)
      const handle = start(server)
      const onSignal = added[0]![1]
      onSignal('SIGTERM')
      await tick()
      onSignal('SIGINT')
      expect(exits).to.deep.equal([1])
      expect(events).to.deep.equal(['shutdown 5000', 'forceShutdown', 'killAll'])
      expect(lines.find((l) => l.level === 'warn')).to.deep.equal({level: 'warn', msg: 'second signal: exiting now', fields: {signal: 'SIGINT'}})
      finish({forced: true})
      await handle.done
    })
  })
})
