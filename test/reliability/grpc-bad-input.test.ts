/**
 * Bad gRPC input against one `fnr serve` (exec runtime, in-process) and one wrapper server:
 * image names, ResourceList payloads, malformed protobuf messages, malformed HTTP/2 and TCP,
 * oversize requests. Each input must end with a clear status (or, below gRPC, a closed stream),
 * and afterwards the server must still be healthy (targets.ts: health SERVING, a good call, no
 * call in flight, no process left).
 */
import {existsSync} from 'node:fs'

import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'

import {faultInput} from '../support/reliability/functions.js'
import {imageCases, frameCases, payloadCases} from '../support/reliability/inputs.js'
import {registerSummary, tally, withinHangLimit} from '../support/reliability/tally.js'
import {MAX_MESSAGE, sharedTargets, type ServeTarget, type Target, type WrapperTarget} from '../support/reliability/targets.js'
import {grpcFrame, http2Exchange, requestBytes, tcpExchange, type Http2Outcome} from '../support/reliability/wire.js'
import {SAMPLE_RL} from '../support/tmp.js'

registerSummary()

const S = grpc.status
const CODE_NAMES = Object.fromEntries(Object.entries(S).map(([k, v]) => [v, k])) as Record<number, string>

interface Outcome {
  code: number
  details: string
  response?: Buffer
}

async function outcomeOf(p: Promise<{resourceList: Buffer}>): Promise<Outcome> {
  try {
    const r = await p
    return {code: S.OK, details: '', response: r.resourceList}
  } catch (err) {
    const e = err as grpc.ServiceError
    if (typeof e.code !== 'number') throw err
    return {code: e.code, details: e.details ?? ''}
  }
}

/** Checks an outcome: an allowed code, and a message that says something (and what it must say). */
function expectOutcome(label: string, o: Outcome, codes: readonly number[], message?: RegExp): void {
  const seen = `${CODE_NAMES[o.code] ?? o.code}: ${o.details.slice(0, 300)}`
  // UNKNOWN is an exception that escaped a handler; UNAVAILABLE means the server went away.
  if (o.code === S.UNKNOWN || o.code === S.UNAVAILABLE) tally.crash(label, `status ${seen}`)
  expect(codes.map((c) => CODE_NAMES[c]), `${label}: got ${seen}`).to.include(CODE_NAMES[o.code])
  if (o.code !== S.OK) {
    expect(o.details.trim(), `${label}: the status message must say what is wrong`).to.not.equal('')
    expect(Buffer.byteLength(o.details), `${label}: status message size`).to.be.at.most(8 * 1024)
    if (message) expect(o.details, label).to.match(message)
  }
}

describe('reliability: bad gRPC input', function () {
  this.timeout(60_000)
  let serve: ServeTarget
  let wrapper: WrapperTarget

  before(async () => {
    ;({serve, wrapper} = await sharedTargets())
  })

  const targets = (): Target[] => [serve, wrapper]

  describe('image names (fnr serve, exec runtime)', () => {
    for (const c of imageCases()) {
      it(c.label, async () => {
        const label = `image ${c.label}`
        tally.tried('grpc image', c.label)
        const o = await withinHangLimit(label, outcomeOf(serve.client.evaluateRaw(c.image, SAMPLE_RL, {deadline: Date.now() + 30_000})))
        expectOutcome(label, o, c.codes, c.message)
        expect(existsSync(serve.fns.canaryMarker), `${label}: the canary (a file in the functions dir mapped to no image) ran`).to.equal(false)
        await serve.assertHealthy(label)
      })
    }
  })

  describe('image names (wrapper server: the entrypoint runs whatever the image)', () => {
    const cases = imageCases().filter((c) => /blank|shell command|path "\/bin\/sh|4097|900000|NUL|lone surrogate|ANSI/.test(c.label))
    for (const c of cases) {
      it(c.label, async () => {
        const label = `wrapper image ${c.label}`
        tally.tried('grpc image (wrapper)', c.label)
        const o = await withinHangLimit(label, outcomeOf(wrapper.client.evaluateRaw(c.image, SAMPLE_RL, {deadline: Date.now() + 30_000})))
        const codes = c.codes.includes(S.NOT_FOUND) ? [S.OK] : c.codes
        expectOutcome(label, o, codes, codes === c.codes ? c.message : undefined)
        expect(existsSync(wrapper.fns.canaryMarker), `${label}: the canary ran`).to.equal(false)
        await wrapper.assertHealthy(label)
      })
    }
  })

  describe('resource_list payloads', () => {
    it('empty resource_list, on both servers', async () => {
      for (const t of targets()) {
        const label = `${t.name}: empty resource_list`
        tally.tried('grpc payload', 'empty')
        const o = await withinHangLimit(label, outcomeOf(t.client.evaluateRaw('example.com/cat:v1', Buffer.alloc(0))))
        expectOutcome(label, o, [S.INVALID_ARGUMENT], /resource_list is empty/)
        await t.assertHealthy(label)
      }
    })

    for (const c of payloadCases()) {
      it(c.label, async () => {
        tally.tried('grpc payload', c.label)
        // Both servers at once (each checks its own health afterwards).
        await Promise.all([
          (async () => {
            // The exec runtime passes the bytes through untouched: cat gives them back unchanged.
            const label = `serve/cat: ${c.label}`
            const echoed = await withinHangLimit(label, outcomeOf(serve.client.evaluateRaw(serve.fns.image.cat!, c.payload, {deadline: Date.now() + 30_000})))
            expectOutcome(label, echoed, [S.OK])
            expect(echoed.response!.equals(c.payload), `${label}: bytes changed on the way`).to.equal(true)
            await serve.assertHealthy(label)
          })(),
          (async () => {
            // The wrapper checks what its entrypoint (an echo) printed: a ResourceList passes,
            // anything else is INTERNAL; output with results is parsed for them.
            const label = `wrapper/echo: ${c.label}`
            const wrapped = await withinHangLimit(label, outcomeOf(wrapper.client.evaluateRaw('example.com/any:v1', c.payload, {deadline: Date.now() + 30_000})))
            expectOutcome(label, wrapped, [S.OK, S.INTERNAL], /not a ResourceList|^$/)
            await wrapper.assertHealthy(label)
          })(),
        ])
      })
    }
  })

  describe('malformed protobuf request messages (raw grpc-js client)', () => {
    for (const c of frameCases()) {
      it(c.label, async () => {
        tally.tried('grpc frame', c.label)
        for (const t of targets()) {
          const label = `${t.name}: frame ${c.label}`
          const o = await withinHangLimit(label, t.raw.call(c.bytes))
          // The wrapper runs its entrypoint whatever the image: where serve says NOT_FOUND it runs.
          const codes = t.name === 'wrapper' && c.codes.includes(S.NOT_FOUND) ? [...c.codes.filter((x) => x !== S.NOT_FOUND), S.OK, S.INTERNAL] : c.codes
          expectOutcome(label, o, codes)
          await t.assertHealthy(label)
        }
      })
    }
  })

  describe('malformed HTTP/2 and TCP', () => {
    const good = requestBytes('example.com/cat:v1', SAMPLE_RL)
    const cases: Array<{label: string; send: (port: number) => Promise<Http2Outcome>; grpcCodes?: number[]}> = [
      {label: 'unknown method', send: (p) => http2Exchange(p, {path: '/evaluator.FunctionEvaluator/Nope', body: grpcFrame(good)}), grpcCodes: [S.UNIMPLEMENTED]},
      {label: 'unknown service', send: (p) => http2Exchange(p, {path: '/nope.Service/EvaluateFunction', body: grpcFrame(good)}), grpcCodes: [S.UNIMPLEMENTED]},
      {label: 'path with traversal', send: (p) => http2Exchange(p, {path: '/../../etc/passwd', body: grpcFrame(good)}), grpcCodes: [S.UNIMPLEMENTED]},
      {label: 'GET instead of POST', send: (p) => http2Exchange(p, {headers: {':method': 'GET'}})},
      {label: 'content-type text/plain', send: (p) => http2Exchange(p, {headers: {'content-type': 'text/plain'}, body: grpcFrame(good)})},
      {label: 'no te header', send: (p) => http2Exchange(p, {headers: {te: ''}, body: grpcFrame(good)})},
      // grpc-js reads a compressed flag without grpc-encoding as identity encoding.
      {label: 'compressed flag without grpc-encoding', send: (p) => http2Exchange(p, {body: grpcFrame(good, {compressed: true})}), grpcCodes: [S.OK, S.INTERNAL, S.UNIMPLEMENTED]},
      {label: 'gzip encoding with bytes that are not gzip', send: (p) => http2Exchange(p, {headers: {'grpc-encoding': 'gzip'}, body: grpcFrame(good, {compressed: true})}), grpcCodes: [S.INTERNAL]},
      {label: 'unsupported encoding', send: (p) => http2Exchange(p, {headers: {'grpc-encoding': 'br'}, body: grpcFrame(good, {compressed: true})}), grpcCodes: [S.UNIMPLEMENTED, S.INTERNAL]},
      {label: 'declared length longer than the body', send: (p) => http2Exchange(p, {body: grpcFrame(good, {declaredLength: good.length + 100})})},
      {label: 'declared length of 4 GiB', send: (p) => http2Exchange(p, {body: grpcFrame(good, {declaredLength: 0xffffffff})}), grpcCodes: [S.RESOURCE_EXHAUSTED, S.INTERNAL]},
      {label: 'two messages in a unary call', send: (p) => http2Exchange(p, {body: Buffer.concat([grpcFrame(good), grpcFrame(good)])})},
      {label: 'no message at all', send: (p) => http2Exchange(p, {})},
      {label: 'half a frame header', send: (p) => http2Exchange(p, {body: Buffer.from([0, 0, 0])})},
      {label: 'reset right after the headers', send: (p) => http2Exchange(p, {resetAfterHeaders: true})},
      {label: 'whole request, then reset at once (the function must be killed)', send: (p) => http2Exchange(p, {body: grpcFrame(requestBytes('example.com/sleepwithchild:v1', SAMPLE_RL)), resetAfterMs: 0, halfClose: true})},
      {label: 'whole request, then reset after 100 ms (the function must be killed)', send: (p) => http2Exchange(p, {body: grpcFrame(requestBytes('example.com/sleepwithchild:v1', SAMPLE_RL)), resetAfterMs: 100, halfClose: true})},
      {label: 'half a message, then reset', send: (p) => http2Exchange(p, {body: grpcFrame(good).subarray(0, 20), resetAfterMs: 200})},
      {label: 'grpc-timeout that is not a timeout', send: (p) => http2Exchange(p, {headers: {'grpc-timeout': 'soon'}, body: grpcFrame(good)})},
      {label: 'grpc-timeout of one nanosecond', send: (p) => http2Exchange(p, {headers: {'grpc-timeout': '1n'}, body: grpcFrame(good)}), grpcCodes: [S.DEADLINE_EXCEEDED, S.OK]},
      {label: 'negative grpc-timeout', send: (p) => http2Exchange(p, {headers: {'grpc-timeout': '-1S'}, body: grpcFrame(good)})},
      {label: '60 kB metadata value', send: (p) => http2Exchange(p, {headers: {'x-big': 'v'.repeat(60_000)}, body: grpcFrame(good)})},
      {label: '500 metadata entries', send: (p) => http2Exchange(p, {headers: Object.fromEntries(Array.from({length: 500}, (_, i) => [`x-h${i}`, 'v'])), body: grpcFrame(good)})},
      {label: 'binary metadata that is not base64', send: (p) => http2Exchange(p, {headers: {'x-data-bin': '*** not base64 ***'}, body: grpcFrame(good)})},
    ]
    for (const c of cases) {
      it(c.label, async () => {
        tally.tried('http2', c.label)
        for (const t of targets()) {
          const label = `${t.name}: HTTP/2 ${c.label}`
          const o = await withinHangLimit(label, c.send(t.port))
          if (c.grpcCodes) expect(c.grpcCodes.map((x) => CODE_NAMES[x]), `${label}: ${JSON.stringify(o)}`).to.include(CODE_NAMES[o.grpcStatus ?? -1])
          // Anything else must still answer (a status, an HTTP error or a closed stream), never hang.
          expect(o.grpcStatus !== undefined || o.httpStatus !== undefined || o.error !== undefined || o.reset === true, `${label}: ${JSON.stringify(o)}`).to.equal(true)
          if (o.grpcStatus !== undefined && o.grpcStatus !== S.OK) expect(o.grpcMessage ?? '', `${label}: status message`).to.not.equal('')
          await t.assertHealthy(label)
        }
      })
    }

    const tcpCases: Array<[string, Buffer]> = [
      ['random bytes', Buffer.from('GARBAGE\r\n\r\n\x00\x01\x02')],
      ['an HTTP/1.1 request', Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n')],
      ['an HTTP/1.1 upgrade to h2c', Buffer.from('GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n')],
      ['a TLS ClientHello', Buffer.from('160301002e0100002a0303' + '00'.repeat(32) + '000002002f0100', 'hex')],
      ['the HTTP/2 preface, then garbage', Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), Buffer.alloc(64, 0xee)])],
      ['the HTTP/2 preface, then a frame of 16 MiB declared length', Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), Buffer.from([0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00])])],
      ['the HTTP/2 preface, then SETTINGS with an invalid window size', Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), Buffer.from([0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff])])],
      ['1 MiB of zeros', Buffer.alloc(1024 * 1024)],
      ['nothing (a silent connection)', Buffer.alloc(0)],
    ]
    for (const [name, bytes] of tcpCases) {
      it(`TCP: ${name}`, async () => {
        tally.tried('tcp', name)
        for (const t of targets()) {
          const label = `${t.name}: TCP ${name}`
          await withinHangLimit(label, tcpExchange(t.port, bytes))
          await t.assertHealthy(label)
        }
      })
    }
  })

  describe('size limits', () => {
    it('a request over the maximum message size ends RESOURCE_EXHAUSTED', async () => {
      for (const [name, size] of [
        ['max + 1', MAX_MESSAGE + 1],
        ['2 x max', 2 * MAX_MESSAGE],
        ['16 x max', 16 * MAX_MESSAGE],
      ] as const) {
        tally.tried('size', `request ${name}`)
        for (const t of targets()) {
          const label = `${t.name}: request of ${name} bytes`
          const o = await withinHangLimit(label, outcomeOf(t.client.evaluateRaw('example.com/cat:v1', Buffer.alloc(size, 'a'))))
          expectOutcome(label, o, [S.RESOURCE_EXHAUSTED])
          await t.assertHealthy(label)
        }
      }
    })

    it('a request that fits but whose echo does not ends RESOURCE_EXHAUSTED', async () => {
      tally.tried('size', 'echo just over the limit')
      const label = 'serve: echo of max - 40 bytes'
      const o = await withinHangLimit(label, outcomeOf(serve.client.evaluateRaw(serve.fns.image.cat!, Buffer.alloc(MAX_MESSAGE - 40, 'a'))))
      expectOutcome(label, o, [S.RESOURCE_EXHAUSTED], /more than the maximum message size/)
      await serve.assertHealthy(label)
    })

    it('output over the limit ends RESOURCE_EXHAUSTED (finite and endless floods)', async () => {
      for (const name of ['floodStdout', 'floodStdoutForever']) {
        tally.tried('size', name)
        const label = `serve: ${name}`
        const o = await withinHangLimit(label, outcomeOf(serve.client.evaluateRaw(serve.fns.image[name]!, SAMPLE_RL)))
        expectOutcome(label, o, [S.RESOURCE_EXHAUSTED], /wrote more than \d+ bytes to stdout/)
        await serve.assertHealthy(label)
      }
      tally.tried('size', 'wrapper flood-stdout')
      const label = 'wrapper: flood-stdout'
      const o = await withinHangLimit(label, outcomeOf(wrapper.client.evaluateRaw('x', faultInput('flood-stdout'))))
      expectOutcome(label, o, [S.RESOURCE_EXHAUSTED])
      await wrapper.assertHealthy(label)
    })

    it('huge failure details are cut to a bounded status message, and the connection stays usable', async () => {
      // Regression: a 300 kB error result used to produce a trailer no client accepts; the call and
      // every later call on the same channel hung.
      for (const [name, pattern] of [
        ['hugeErrorResult', /exited with code 1[\s\S]*\[error\]: x{100}/],
        ['manyErrorResults', /and \d+ more error result/],
        ['hugeStderrLine', /exited with code 2/],
      ] as const) {
        tally.tried('size', name)
        const label = `serve: ${name}`
        const o = await withinHangLimit(label, outcomeOf(serve.client.evaluateRaw(serve.fns.image[name]!, SAMPLE_RL)))
        expectOutcome(label, o, [S.INTERNAL], pattern)
        await serve.assertHealthy(label)
      }
    })
  })

  describe('deadlines and cancellation', () => {
    const sleepy = Buffer.from(SAMPLE_RL)
    const cases: Array<{label: string; run: () => Promise<Outcome>; codes: number[]; target: () => Target}> = [
      {label: 'deadline already passed', run: () => outcomeOf(serve.client.evaluateRaw(serve.fns.image.cat!, sleepy, {deadline: Date.now() - 1000})), codes: [S.DEADLINE_EXCEEDED], target: () => serve},
      {label: 'deadline in 1 ms', run: () => outcomeOf(serve.client.evaluateRaw(serve.fns.image.cat!, sleepy, {deadline: Date.now() + 1})), codes: [S.DEADLINE_EXCEEDED, S.OK], target: () => serve},
      {label: 'deadline while the function sleeps', run: () => outcomeOf(serve.client.evaluateRaw(serve.fns.image.sleep!, sleepy, {deadline: Date.now() + 300})), codes: [S.DEADLINE_EXCEEDED], target: () => serve},
      {label: 'deadline while a grandchild runs', run: () => outcomeOf(serve.client.evaluateRaw(serve.fns.image.sleepWithChild!, sleepy, {deadline: Date.now() + 300})), codes: [S.DEADLINE_EXCEEDED], target: () => serve},
      {label: 'deadline while stdin is never read (900 kB input)', run: () => outcomeOf(serve.client.evaluateRaw(serve.fns.image.hangNoRead!, Buffer.alloc(900_000, 'a'), {deadline: Date.now() + 300})), codes: [S.DEADLINE_EXCEEDED], target: () => serve},
      {label: 'deadline during an endless stderr flood', run: () => outcomeOf(serve.client.evaluateRaw(serve.fns.image.floodStderrForever!, sleepy, {deadline: Date.now() + 300})), codes: [S.DEADLINE_EXCEEDED], target: () => serve},
      {label: 'wrapper: deadline while the function hangs', run: () => outcomeOf(wrapper.client.evaluateRaw('x', faultInput('hang'), {deadline: Date.now() + 500})), codes: [S.DEADLINE_EXCEEDED], target: () => wrapper},
      // grpc-js (1.14) still sends a call cancelled before it started on a connected channel, and never
      // resets it: the server cannot know, and runs the function. With a quick function that is harmless.
      {label: 'cancelled before it started', run: () => outcomeOf(serve.client.evaluateRaw(serve.fns.image.cat!, sleepy, {signal: AbortSignal.abort()})), codes: [S.CANCELLED], target: () => serve},
      {label: 'cancelled while the function sleeps', run: () => outcomeOf(serve.client.evaluateRaw(serve.fns.image.sleep!, sleepy, {signal: AbortSignal.timeout(200)})), codes: [S.CANCELLED], target: () => serve},
      {label: 'cancelled during an endless stdout flood', run: () => outcomeOf(serve.client.evaluateRaw(serve.fns.image.floodStdoutForever!, sleepy, {signal: AbortSignal.timeout(30)})), codes: [S.CANCELLED, S.RESOURCE_EXHAUSTED], target: () => serve},
      {label: 'cancelled while uploading 900 kB to a function that never reads', run: () => outcomeOf(serve.client.evaluateRaw(serve.fns.image.hangNoRead!, Buffer.alloc(900_000, 'b'), {signal: AbortSignal.timeout(100)})), codes: [S.CANCELLED], target: () => serve},
      {label: 'wrapper: cancelled while the function hangs', run: () => outcomeOf(wrapper.client.evaluateRaw('x', faultInput('hang'), {signal: AbortSignal.timeout(300)})), codes: [S.CANCELLED], target: () => wrapper},
    ]
    for (const c of cases) {
      it(c.label, async () => {
        tally.tried('deadline/cancel', c.label)
        const o = await withinHangLimit(c.label, c.run())
        expectOutcome(c.label, o, c.codes)
        await c.target().assertHealthy(c.label)
      })
    }

    it('50 calls cancelled at once leave nothing behind', async () => {
      tally.tried('deadline/cancel', '50 concurrent cancels')
      const outcomes = await withinHangLimit(
        '50 concurrent cancels',
        Promise.all(Array.from({length: 50}, () => outcomeOf(serve.client.evaluateRaw(serve.fns.image.sleepWithChild!, sleepy, {signal: AbortSignal.timeout(300)})))),
      )
      for (const o of outcomes) expectOutcome('50 concurrent cancels', o, [S.CANCELLED])
      await serve.assertHealthy('50 concurrent cancels')
    })
  })
})
