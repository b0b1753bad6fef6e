/**
 * Load: 1,000 concurrent EvaluateFunction calls on the exec runtime (the number, in the
 * short run too: about 2-3 s here, 4-9 s on a busy 2-core machine), one channel (as Porch uses),
 * with 0 errors, every answer the caller's own bytes, and nothing left behind
 * (scripts/reliability.mjs also repeats them in rounds and soaks).
 */
import {expect} from 'chai'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {concurrentLoad} from '../support/reliability/load.js'
import {registerSummary, withinHangLimit} from '../support/reliability/tally.js'
import {sharedTargets, type ServeTarget} from '../support/reliability/targets.js'

registerSummary()

describe('reliability: load', function () {
  this.timeout(120_000)
  let serve: ServeTarget

  before(async () => {
    ;({serve} = await sharedTargets())
  })

  const calls = 1000
  it(`${calls} concurrent calls (exec) on one channel: 0 errors, every caller gets its own output`, async () => {
    const client = new EvaluatorClient(serve.address)
    try {
      // The hang limit is per input elsewhere; here the whole batch gets a generous 60 s.
      const r = await withinHangLimit(`${calls} concurrent calls`, concurrentLoad(client, serve.fns.image.catBinary!, calls), 60_000)
      process.stdout.write(`      (${calls} concurrent calls: ${r.errors.length} errors, ${r.ms} ms, latency p50 ${r.p50} ms, p99 ${r.p99} ms)\n`)
      expect(r.errors.slice(0, 5), `${r.errors.length} errors`).to.deep.equal([])
      expect(r.wrongAnswers).to.equal(0)
    } finally {
      client.close()
    }
    await serve.assertHealthy(`${calls} concurrent calls`)
  })
})
