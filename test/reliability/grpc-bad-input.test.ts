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
import {grpcFrame, http2Exchange, requestBytes, tcpExchange, type Http2Request} from '../support/reliability/wire.js'
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
        // names that are documented spellings of a mapped image (expected OK) are controls, not bad inputs
        tally.tried('grpc image', {image: c.image}, {valid: c.codes.every((x) => x === S.OK)})
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
        tally.tried('grpc image', {image: c.image}, {valid: c.codes.every((x) => x === S.OK)})
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
        tally.tried('grpc payload', {resourceList: Buffer.alloc(0)})
        const o = await withinHangLimit(label, outcomeOf(t.client.evaluateRaw('example.com/cat:v1', Buffer.alloc(0))))
        expectOutcome(label, o, [S.INVALID_ARGUMENT], /resource_list is empty/)
        await t.assertHealthy(label)
      }
    })

    for (const c of payloadCases()) {
      it(c.label, async () => {
        tally.tried('grpc payload', {resourceList: c.payload}, {valid: c.valid})
        // Both servers at once (each checks its own health afterwards).
        await Promise.all([
          (async () => {
            // The exec runtime passes the bytes through untouched: cat gives them back unchanged.
            const label = `serve/cat: ${c.label}`
            const echoed = await withinHangLimit(label, outcomeOf(serve.client.evaluateRaw(serve.fns.image.cat!, c.payload, {deadline: Date.now() + 30_000})))
            if (c.wrapper === 'blank') expectOutcome(label, echoed, [S.INTERNAL], /wrote only whitespace \(\d+ bytes\) to stdout, not a ResourceList/)
            else {
              expectOutcome(label, echoed, [S.OK])
              expect(echoed.response!.equals(c.payload), `${label}: bytes changed on the way`).to.equal(true)
            }
            await serve.assertHealthy(label)
          })(),
          (async () => {
            // The wrapper checks what its entrypoint (an echo) printed, cheaply (inputs.ts PayloadCase):
            // each case says whether that passes (OK, its own bytes back) or is INTERNAL.
            const label = `wrapper/echo: ${c.label}`
            const wrapped = await withinHangLimit(label, outcomeOf(wrapper.client.evaluateRaw('example.com/any:v1', c.payload, {deadline: Date.now() + 30_000})))
            if (c.wrapper === 'blank') expectOutcome(label, wrapped, [S.INTERNAL], /wrote only whitespace \(\d+ bytes\) to stdout, not a ResourceList/)
            else if (c.wrapper === 'accepts') {
              expectOutcome(label, wrapped, [S.OK])
              expect(wrapped.response!.equals(c.payload), `${label}: bytes changed on the way`).to.equal(true)
            } else expectOutcome(label, wrapped, [S.INTERNAL], /^the output of function "example\.com\/any:v1" is not a ResourceList$/)
            await wrapper.assertHealthy(label)
          })(),
        ])
      })
    }
  })

  describe('malformed protobuf request messages (raw grpc-js client)', () => {
    for (const c of frameCases()) {
      it(c.label, async () => {
        tally.tried('grpc frame', {requestMessage: c.bytes})
        for (const t of targets()) {
          const label = `${t.name}: frame ${c.label}`
          const o = await withinHangLimit(label, t.raw.call(c.bytes))
          expectOutcome(label, o, [t.name === 'serve' ? c.serve : c.wrapper], c.message)
          await t.assertHealthy(label)
        }
      })
    }
  })

  describe('malformed HTTP/2 and TCP', () => {
    const good = requestBytes('example.com/cat:v1', SAMPLE_RL)
    // A call whose function runs until it is killed: serve's sleepWithChild, the wrapper's "hang" fault.
    const endless = (t: Target): Buffer => (t.name === 'serve' ? requestBytes('example.com/sleepwithchild:v1', SAMPLE_RL) : requestBytes('example.com/any:v1', faultInput('hang')))
    const NO_MESSAGE = /^Received no request message for server streaming method \/evaluator\.FunctionEvaluator\/EvaluateFunction$/
    /**
     * What each request gets, exactly (grpc-js 1.14 and Node's HTTP/2 server): a gRPC status (with
     * what its message says), an HTTP status without gRPC, our own reset before any answer, or the
     * stream closed by the server's HTTP/2 layer.
     */
    type Expect = {grpc: number; message?: RegExp} | {http: number} | {reset: true} | {streamError: RegExp}
    const cases: Array<{label: string; request: (t: Target) => Http2Request; expect: Expect}> = [
      {label: 'unknown method', request: () => ({path: '/evaluator.FunctionEvaluator/Nope', body: grpcFrame(good)}), expect: {grpc: S.UNIMPLEMENTED, message: /\/evaluator\.FunctionEvaluator\/Nope/}},
      {label: 'unknown service', request: () => ({path: '/nope.Service/EvaluateFunction', body: grpcFrame(good)}), expect: {grpc: S.UNIMPLEMENTED, message: /\/nope\.Service\/EvaluateFunction/}},
      {label: 'path with traversal', request: () => ({path: '/../../etc/passwd', body: grpcFrame(good)}), expect: {grpc: S.UNIMPLEMENTED, message: /passwd/}},
      // grpc-js does not look at the method: a GET is a call without a message
      {label: 'GET instead of POST', request: () => ({headers: {':method': 'GET'}}), expect: {grpc: S.UNIMPLEMENTED, message: NO_MESSAGE}},
      {label: 'content-type text/plain', request: () => ({headers: {'content-type': 'text/plain'}, body: grpcFrame(good)}), expect: {http: 415}},
      // grpc-js does not require te: trailers (the gRPC spec says clients send it)
      {label: 'no te header', request: () => ({headers: {te: ''}, body: grpcFrame(good)}), expect: {grpc: S.OK}},
      // grpc-js reads a compressed flag without grpc-encoding as identity encoding
      {label: 'compressed flag without grpc-encoding', request: () => ({body: grpcFrame(good, {compressed: true})}), expect: {grpc: S.OK}},
      {label: 'gzip encoding with bytes that are not gzip', request: () => ({headers: {'grpc-encoding': 'gzip'}, body: grpcFrame(good, {compressed: true})}), expect: {grpc: S.INTERNAL, message: /^Failed to decompress message/}},
      {label: 'unsupported encoding', request: () => ({headers: {'grpc-encoding': 'br'}, body: grpcFrame(good, {compressed: true})}), expect: {grpc: S.UNIMPLEMENTED, message: /^Received message compressed with unsupported encoding "br"$/}},
      // the request ends before the declared length: no whole message arrived
      {label: 'declared length longer than the body', request: () => ({body: grpcFrame(good, {declaredLength: good.length + 100})}), expect: {grpc: S.UNIMPLEMENTED, message: NO_MESSAGE}},
      {label: 'declared length of 4 GiB', request: () => ({body: grpcFrame(good, {declaredLength: 0xffffffff})}), expect: {grpc: S.RESOURCE_EXHAUSTED, message: /^Received message larger than max \(4294967295 vs 1048576\)$/}},
      {label: 'two messages in a unary call', request: () => ({body: Buffer.concat([grpcFrame(good), grpcFrame(good)])}), expect: {grpc: S.UNIMPLEMENTED, message: /^Received a second request message for server streaming method/}},
      {label: 'no message at all', request: () => ({}), expect: {grpc: S.UNIMPLEMENTED, message: NO_MESSAGE}},
      {label: 'half a frame header', request: () => ({body: Buffer.from([0, 0, 0])}), expect: {grpc: S.UNIMPLEMENTED, message: NO_MESSAGE}},
      {label: 'reset right after the headers', request: () => ({resetAfterHeaders: true}), expect: {reset: true}},
      {label: 'whole request, then reset at once (the function must be killed)', request: (t) => ({body: grpcFrame(endless(t)), resetAfterMs: 0, halfClose: true}), expect: {reset: true}},
      {label: 'whole request, then reset after 100 ms (the function must be killed)', request: (t) => ({body: grpcFrame(endless(t)), resetAfterMs: 100, halfClose: true}), expect: {reset: true}},
      {label: 'half a message, then reset', request: () => ({body: grpcFrame(good).subarray(0, 20), resetAfterMs: 200}), expect: {reset: true}},
      {label: 'grpc-timeout that is not a timeout', request: () => ({headers: {'grpc-timeout': 'soon'}, body: grpcFrame(good)}), expect: {grpc: S.INTERNAL, message: /^Invalid grpc-timeout value "soon"$/}},
      // 1 ns has passed before the handler runs: the function is never started
      {label: 'grpc-timeout of one nanosecond', request: () => ({headers: {'grpc-timeout': '1n'}, body: grpcFrame(good)}), expect: {grpc: S.DEADLINE_EXCEEDED, message: /^deadline exceeded before function "example\.com\/cat:v1" started$/}},
      // grpc-js's timeout pattern is not anchored: "-100S" reads as 100 s, plenty for the call
      {label: 'negative grpc-timeout', request: () => ({headers: {'grpc-timeout': '-100S'}, body: grpcFrame(good)}), expect: {grpc: S.OK}},
      {label: '60 kB metadata value', request: () => ({headers: {'x-big': 'v'.repeat(60_000)}, body: grpcFrame(good)}), expect: {grpc: S.OK}},
      // Node's HTTP/2 server takes at most 128 header pairs (maxHeaderListPairs) and resets the stream
      {label: '500 metadata entries', request: () => ({headers: Object.fromEntries(Array.from({length: 500}, (_, i) => [`x-h${i}`, 'v'])), body: grpcFrame(good)}), expect: {streamError: /NGHTTP2_ENHANCE_YOUR_CALM/}},
      // grpc-js decodes -bin values leniently (Buffer.from base64 skips what is not base64)
      {label: 'binary metadata that is not base64', request: () => ({headers: {'x-data-bin': '*** not base64 ***'}, body: grpcFrame(good)}), expect: {grpc: S.OK}},
    ]
    for (const c of cases) {
      it(c.label, async () => {
        tally.tried('http2', {http2: c.request(serve)})
        for (const t of targets()) {
          const label = `${t.name}: HTTP/2 ${c.label}`
          const o = await withinHangLimit(label, http2Exchange(t.port, c.request(t)))
          const seen = `${label}: ${JSON.stringify({...o, grpcStatus: o.grpcStatus === undefined ? undefined : CODE_NAMES[o.grpcStatus]})}`
          if ('grpc' in c.expect) {
            expect({httpStatus: o.httpStatus, grpcStatus: CODE_NAMES[o.grpcStatus ?? -1], error: o.error}, seen).to.deep.equal({httpStatus: 200, grpcStatus: CODE_NAMES[c.expect.grpc], error: undefined})
            if (c.expect.grpc !== S.OK) expect(o.grpcMessage ?? '', `${seen}: status message`).to.not.equal('')
            if (c.expect.message) expect(o.grpcMessage, seen).to.match(c.expect.message)
          } else if ('http' in c.expect) {
            expect({httpStatus: o.httpStatus, grpcStatus: o.grpcStatus}, seen).to.deep.equal({httpStatus: c.expect.http, grpcStatus: undefined})
          } else if ('reset' in c.expect) {
            // no answer came before our reset
            expect(o, seen).to.deep.equal({reset: true})
          } else {
            expect({httpStatus: o.httpStatus, grpcStatus: o.grpcStatus}, seen).to.deep.equal({httpStatus: undefined, grpcStatus: undefined})
            expect(o.error, seen).to.match(c.expect.streamError)
          }
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
        tally.tried('tcp', {tcp: bytes})
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
        tally.tried('size', {requestResourceList: {bytes: size, fill: 'a'}})
        for (const t of targets()) {
          const label = `${t.name}: request of ${name} bytes`
          const o = await withinHangLimit(label, outcomeOf(t.client.evaluateRaw('example.com/cat:v1', Buffer.alloc(size, 'a'))))
          expectOutcome(label, o, [S.RESOURCE_EXHAUSTED])
          await t.assertHealthy(label)
        }
      }
    })

    it('a request that fits is echoed whole: only the real framing counts (max - 40 was once refused)', async () => {
      tally.tried('size', {requestResourceList: {bytes: MAX_MESSAGE - 40, fill: 'a'}})
      const label = 'serve: echo of max - 40 bytes'
      const o = await withinHangLimit(label, outcomeOf(serve.client.evaluateRaw(serve.fns.image.cat!, Buffer.alloc(MAX_MESSAGE - 40, 'a'))))
      expectOutcome(label, o, [S.OK])
      await serve.assertHealthy(label)
    })

    it('output over the limit ends RESOURCE_EXHAUSTED (finite and endless floods)', async () => {
      for (const name of ['floodStdout', 'floodStdoutForever']) {
        tally.fault(`serve: ${name}`)
        const label = `serve: ${name}`
        const o = await withinHangLimit(label, outcomeOf(serve.client.evaluateRaw(serve.fns.image[name]!, SAMPLE_RL)))
        expectOutcome(label, o, [S.RESOURCE_EXHAUSTED], /wrote more than \d+ bytes to stdout/)
        await serve.assertHealthy(label)
      }
      tally.fault('wrapper: flood-stdout')
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
        ['manyErrorResults', /and \d+ more result/],
        ['hugeStderrLine', /exited with code 2/],
      ] as const) {
        tally.fault(`serve: ${name}`)
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
        // the input is the call's timing (its label says which): one key per case
        tally.tried('deadline/cancel', {call: c.label})
        const o = await withinHangLimit(c.label, c.run())
        expectOutcome(c.label, o, c.codes)
        await c.target().assertHealthy(c.label)
      })
    }

    it('50 calls cancelled at once leave nothing behind', async () => {
      tally.tried('deadline/cancel', {call: '50 concurrent cancels'})
      const outcomes = await withinHangLimit(
        '50 concurrent cancels',
        Promise.all(Array.from({length: 50}, () => outcomeOf(serve.client.evaluateRaw(serve.fns.image.sleepWithChild!, sleepy, {signal: AbortSignal.timeout(300)})))),
      )
      for (const o of outcomes) expectOutcome('50 concurrent cancels', o, [S.CANCELLED])
      await serve.assertHealthy('50 concurrent cancels')
    })
  })
})
