/**
 * The EvaluateFunctionResponse's bytes (src/lib/grpc/reply.ts): the serializer writes what Go's
 * protobuf writes (empty fields left out), in place around an output that has room
 * (src/lib/headroom.ts) or into a new buffer, and the log fits the message size.
 */
import {expect} from 'chai'
import fc from 'fast-check'

import type {EvaluationRequest, EvaluationResponse} from '../../src/lib/evaluator.js'
import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {EvaluatorServer} from '../../src/lib/grpc/server.js'
import {framingCounts} from '../../src/lib/grpc/internals.js'
import {claimHeadroom, joinWithHeadroom, type Headroom} from '../../src/lib/headroom.js'
import type {EvaluateFunctionResponse} from '../../src/lib/grpc/proto.js'
import {fitLog, framedResponseSerializer, logCutNotice, logRoom, REPLY_HEADROOM, responseSize, takePrefixed} from '../../src/lib/grpc/reply.js'
import {referenceEvaluateFunction} from '../support/reference-protos.js'

/** protobufjs reading proto/evaluator.proto: the reference the bytes are read back with. */
const decode = (b: Buffer): EvaluateFunctionResponse => referenceEvaluateFunction().responseDeserialize(b) as EvaluateFunctionResponse
const serialize = framedResponseSerializer()

/** An output joined from chunks with the reply's room around it, as the process runner makes it for a log of `logLength`. */
function roomyOutput(text: string, logLength: number): Buffer {
  const bytes = Buffer.from(text)
  const half = Math.floor(bytes.length / 2)
  return joinWithHeadroom([bytes.subarray(0, half), bytes.subarray(half)], bytes.length, {before: REPLY_HEADROOM.before, after: REPLY_HEADROOM.after + logLength})
}

/** Go's bytes: resource_list then log, each left out when empty. */
function goBytes(out: Buffer, log: Buffer): Buffer {
  const field = (tag: number, b: Buffer): Buffer[] => {
    if (b.length === 0) return []
    const len: number[] = []
    for (let v = b.length; ; v = Math.floor(v / 128)) {
      if (v <= 0x7f) {
        len.push(v)
        break
      }
      len.push((v % 128) | 0x80)
    }
    return [Buffer.from([tag, ...len]), b]
  }
  return Buffer.concat([...field(0x0a, out), ...field(0x12, log)])
}

describe('grpc/reply: the response bytes', () => {
  it('writes an output that has room in place: a view of its memory, the bytes Go writes, and protobufjs reads them back', () => {
    for (const size of [1, 127, 128, 300, 20_000, 3 * 1024 * 1024]) {
      for (const log of [Buffer.alloc(0), Buffer.from('warning: x\n'), Buffer.alloc(200, 'e')]) {
        const out = roomyOutput('k'.repeat(size), log.length)
        const message = serialize({resourceList: out, log})
        expect(message.buffer, `${size}/${log.length}`).to.equal(out.buffer)
        expect(message.equals(goBytes(out, log))).to.equal(true)
        const back = decode(message)
        expect(Buffer.from(back.resourceList).equals(out)).to.equal(true)
        expect(Buffer.from(back.log).equals(log)).to.equal(true)
      }
    }
  })

  it('writes gRPC\'s prefix in front of a message written in place, in the same memory, taken once', () => {
    const out = roomyOutput('kind: ResourceList\n'.repeat(100), 5)
    const message = serialize({resourceList: out, log: Buffer.from('hello')})
    const framed = takePrefixed(message)!
    expect(framed.buffer).to.equal(out.buffer)
    expect(framed.byteOffset).to.equal(message.byteOffset - 5)
    expect([framed[0], framed.readUInt32BE(1)]).to.deep.equal([0, message.length])
    expect(framed.subarray(5).equals(message)).to.equal(true)
    expect(takePrefixed(message)).to.equal(undefined)
    // a message written into a new buffer has none: grpc-js frames it
    expect(takePrefixed(serialize({resourceList: Buffer.from('kind: ResourceList\n'), log: Buffer.alloc(0)}))).to.equal(undefined)
  })

  it('uses the room once: a second serialization of the same output copies it, with the same bytes', () => {
    const out = roomyOutput('kind: ResourceList\n'.repeat(100), 5)
    const first = serialize({resourceList: out, log: Buffer.from('hello')})
    const second = serialize({resourceList: out, log: Buffer.from('hello')})
    expect(first.buffer).to.equal(out.buffer)
    expect(second.buffer).to.not.equal(out.buffer)
    expect(second.equals(first)).to.equal(true)
    expect(claimHeadroom(out)).to.equal(undefined)
  })

  it('copies when the log is longer than the room behind the output (a cut log with its notice), or the output has no room', () => {
    const log = Buffer.from(logCutNotice(123) + 'tail')
    const out = roomyOutput('x'.repeat(1000), 4)
    const message = serialize({resourceList: out, log})
    expect(message.buffer).to.not.equal(out.buffer)
    expect(message.equals(goBytes(out, log))).to.equal(true)
    const plain = Buffer.from('y'.repeat(1000))
    expect(serialize({resourceList: plain, log}).equals(goBytes(plain, log))).to.equal(true)
    expect(serialize({resourceList: Buffer.alloc(0), log: Buffer.alloc(0)}).length).to.equal(0)
  })

  it('one chunk is passed on without room, and an empty room is no room', () => {
    const one = Buffer.from('abc')
    expect(joinWithHeadroom([one], 3, {before: 6, after: 6})).to.equal(one)
    expect(claimHeadroom(one)).to.equal(undefined)
    const joined = joinWithHeadroom([Buffer.from('a'), Buffer.from('b')], 2, {before: 0, after: 0})
    expect(joined.toString()).to.equal('ab')
    expect(claimHeadroom(joined)).to.equal(undefined)
  })

  it('logRoom is the largest log that fits (property over sizes around varint boundaries)', () => {
    const around = fc.constantFrom(127, 128, 16_383, 16_384, 2_097_151, 2_097_152, 6 * 1024 * 1024).chain((b) => fc.integer({min: Math.max(0, b - 300), max: b + 300}))
    fc.assert(
      fc.property(around, around, (max, out) => {
        const room = logRoom(max, out)
        if (room < 0) {
          expect(responseSize(out, 0)).to.be.above(max)
        } else {
          expect(responseSize(out, room)).to.be.at.most(max)
          expect(responseSize(out, room + 1)).to.be.above(max)
        }
      }),
      {numRuns: 2000},
    )
  })

  it('fitLog: an output of max - 5 bytes fits at 6 MiB with an empty log (as Porch sends it), one more byte is RESOURCE_EXHAUSTED naming the framing', () => {
    const max = 6 * 1024 * 1024
    expect(fitLog(max, 'img', {resourceList: new Uint8Array(max - 5), log: Buffer.from('log')}).length).to.equal(0)
    expect(() => fitLog(max, 'img', {resourceList: new Uint8Array(max - 4), log: Buffer.alloc(0)})).to.throw(/returned 6291452 bytes, more than fit in the maximum message size 6291456 \(the response adds 5 bytes of framing\)/)
  })

  it('the server asks the evaluator for the reply\'s room and sends an output that has it from there (claimed), byte for byte', async () => {
    const asked: Array<Headroom | undefined> = []
    const outputs: Buffer[] = []
    const evaluator = {
      name: 'fake',
      async evaluate(request: EvaluationRequest): Promise<EvaluationResponse> {
        asked.push(request.outputHeadroom)
        const out = roomyOutput(request.resourceList.toString().repeat(1000), 4)
        outputs.push(out)
        return {resourceList: out, log: Buffer.from('logs'), evaluator: 'fake'}
      },
      async close(): Promise<void> {},
    }
    const server = new EvaluatorServer({evaluator, maxMessageSize: 4 * 1024 * 1024, host: '127.0.0.1', port: 0})
    const client = new EvaluatorClient(`127.0.0.1:${await server.start()}`, {maxMessageSize: 4 * 1024 * 1024})
    try {
      const res = await client.evaluateRaw('example.com/fake:v1', Buffer.from('kind: ResourceList\n'))
      expect(asked).to.deep.equal([REPLY_HEADROOM])
      expect(Buffer.from(res.resourceList).equals(outputs[0]!)).to.equal(true)
      expect(Buffer.from(res.log).toString()).to.equal('logs')
      expect(claimHeadroom(outputs[0]!), 'the serializer took the room').to.equal(undefined)
      // and grpc-js sent it from there too, with gRPC's prefix written in front (internals.ts)
      const {inPlace, copied} = framingCounts
      const again = await client.evaluateRaw('example.com/fake:v1', Buffer.from('kind: ResourceList\n'))
      expect(Buffer.from(again.resourceList).equals(outputs[1]!)).to.equal(true)
      expect([framingCounts.inPlace - inPlace, framingCounts.copied - copied]).to.deep.equal([1, 0])
    } finally {
      client.close()
      server.forceShutdown()
    }
  })
})

