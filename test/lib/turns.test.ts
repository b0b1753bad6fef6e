/**
 * Turns of the event loop (src/lib/turns.ts): CPU work of many calls that end together is taken
 * one piece per iteration of the loop, so timers and sockets are served between the pieces; and
 * the scan that cuts blank runs in results (process/results.ts) agrees with the expression it
 * replaced.
 */
import {expect} from 'chai'
import {stat} from 'node:fs'

import {collapseBlankRuns} from '../../src/lib/process/results.js'
import {nextTurn, turnsWaiting} from '../../src/lib/turns.js'

function busy(ms: number): void {
  const until = performance.now() + ms
  while (performance.now() < until) {
    // the synchronous work of one call
  }
}

describe('turns of the event loop (turns.ts)', () => {
  /**
   * Continues in the poll phase of the event loop (an fs callback), with a timer due: what the
   * loop does next is then fixed (this iteration's check phase, then the next one's timers), as
   * when many calls end in one read of the spawner's messages.
   */
  async function inPollPhaseWithTimerDue(order: string[]): Promise<void> {
    await new Promise<void>((resolve) => stat('.', () => resolve()))
    setTimeout(() => order.push('timer'), 1)
    busy(3)
  }

  it('resumes one waiter per iteration of the loop: a timer due meanwhile runs between two of them', async () => {
    const order: string[] = []
    const work = async (name: string): Promise<void> => {
      await nextTurn()
      order.push(name)
      busy(20)
    }
    // Three calls that end in the same tick, with a timer already due.
    await inPollPhaseWithTimerDue(order)
    await Promise.all([work('a'), work('b'), work('c')])
    expect(order).to.deep.equal(['a', 'timer', 'b', 'c'])
    expect(turnsWaiting()).to.equal(0)
  })

  it('plain setImmediate would not: every immediate queued in one phase runs before the timer (why turns.ts exists)', async () => {
    const order: string[] = []
    const work = (name: string): Promise<void> =>
      new Promise((resolve) =>
        setImmediate(() => {
          order.push(name)
          busy(20)
          resolve()
        }),
      )
    await inPollPhaseWithTimerDue(order)
    await Promise.all([work('a'), work('b'), work('c')])
    await new Promise((resolve) => setTimeout(resolve, 5))
    expect(order).to.deep.equal(['a', 'b', 'c', 'timer'])
  })

  it('a socket is read between two turns', async () => {
    const {createServer, connect} = await import('node:net')
    const server = createServer((s) => s.end('x'))
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const port = (server.address() as {port: number}).port
    const order: string[] = []
    try {
      const got = new Promise<void>((resolve) => connect(port, '127.0.0.1').on('data', () => (order.push('data'), resolve())))
      // wait until the reply is surely in the socket's buffer, then queue many turns at once
      await new Promise((resolve) => setTimeout(resolve, 50))
      const calls = Array.from({length: 20}, async (_, i) => {
        await nextTurn()
        order.push(String(i))
        busy(5)
      })
      await Promise.all([...calls, got])
      expect(order.indexOf('data'), order.join(' ')).to.be.lessThan(20)
    } finally {
      server.close()
    }
  })
})

describe('collapseBlankRuns (process/results.ts)', () => {
  const EXPRESSION = /\n(?:[ \t]*\r?\n){2,}/g
  const pieces = ['\n', '\n', '\n', ' ', '\t', '\r', 'a', '- b: c', '\r\n', '  \n', '#']

  it('agrees with the regular expression it replaced on 5,000 generated texts', () => {
    let seed = 7
    const random = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2147483648
      return seed % n
    }
    for (let k = 0; k < 5000; k++) {
      const text = Array.from({length: random(30)}, () => pieces[random(pieces.length)]).join('')
      expect(collapseBlankRuns(text), JSON.stringify(text)).to.equal(text.replace(EXPRESSION, '\n\n'))
    }
  })

  it('cuts a 1 MB run to one blank line and leaves text without runs as it is', () => {
    const text = `- message: a\n${'\n'.repeat(1_000_000)}- message: b\n`
    expect(collapseBlankRuns(text)).to.equal('- message: a\n\n- message: b\n')
    const plain = '- message: a\n\n- message: b\n'
    expect(collapseBlankRuns(plain)).to.equal(plain)
  })
})
