/**
 * fnr's own coding of the protocol's messages (src/lib/grpc/wire.ts, proto.ts, health.ts) held to
 * protobufjs reading the .proto files (test/support/reference-protos.ts), byte for byte both ways,
 * and to Go's protobuf rules where the two differ (empty fields left out; unknown fields, groups
 * and fields of another wire type skipped; malformed messages refused); then a server that reads
 * a newer client's fields and refuses a malformed request without stopping.
 */
import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'
import fc from 'fast-check'

import type {EvaluationRequest, Evaluator} from '../../src/lib/evaluator.js'
import {decodeCheckRequest, decodeCheckResponse, encodeCheckRequest, encodeCheckResponse, SERVING_STATUSES} from '../../src/lib/grpc/health.js'
import {decodeRequest, decodeResponse, EVALUATE_METHOD_PATH, encodeRequest, encodeResponse} from '../../src/lib/grpc/proto.js'
import {EvaluatorServer} from '../../src/lib/grpc/server.js'
import {MessageWriter, readMessage, varintLength, WireError, writeVarint} from '../../src/lib/grpc/wire.js'
import {referenceEvaluateFunction, referenceHealth} from '../support/reference-protos.js'

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex')
const plain = <T extends object>(v: T): Record<string, unknown> => Object.fromEntries(Object.entries(v).map(([k, x]) => [k, x instanceof Uint8Array ? Buffer.from(x).toString('hex') : x]))

describe('grpc/wire: the protocol\'s messages without protobufjs', () => {
  it('varints: the length and the bytes at every boundary, beyond 32 bits too', () => {
    for (const [n, len] of [[0, 1], [127, 1], [128, 2], [16_383, 2], [16_384, 3], [2 ** 28 - 1, 4], [2 ** 28, 5], [2 ** 32 - 1, 5], [2 ** 35, 6], [2 ** 53 - 1, 8]] as const) {
      expect(varintLength(n), String(n)).to.equal(len)
      const buf = Buffer.alloc(10)
      expect(writeVarint(buf, 0, n)).to.equal(len)
      let read = -1
      readMessage(Buffer.concat([Buffer.from([0x08]), buf.subarray(0, len)]), (_f, v) => (read = v.wireType === 0 ? v.value : -2))
      expect(read, String(n)).to.equal(n)
    }
  })

  it('EvaluateFunctionRequest: the bytes protobufjs writes for fields that are set, read back the same both ways; empty fields left out as Go does', () => {
    const ref = referenceEvaluateFunction()
    fc.assert(
      fc.property(fc.uint8Array({maxLength: 600}), fc.string({unit: 'grapheme', maxLength: 80}), (list, image) => {
        const request = {resourceList: Buffer.from(list), image}
        const ours = encodeRequest(request)
        const theirs = ref.requestSerialize(request)
        if (list.length > 0 && image !== '') expect(ours.equals(theirs)).to.equal(true)
        expect(plain(ref.requestDeserialize(ours))).to.deep.equal(plain(request))
        expect(plain(decodeRequest(theirs))).to.deep.equal(plain(request))
      }),
      {numRuns: 300},
    )
    expect(encodeRequest({resourceList: Buffer.alloc(0), image: ''}).length).to.equal(0)
    expect(encodeRequest({resourceList: Buffer.from('ab'), image: 'i'}).toString('hex')).to.equal('0a026162' + '120169')
    expect(plain(decodeRequest(Buffer.alloc(0)))).to.deep.equal({resourceList: '', image: ''})
  })

  it('EvaluateFunctionResponse: the same, and a large output', () => {
    const ref = referenceEvaluateFunction()
    fc.assert(
      fc.property(fc.uint8Array({maxLength: 600}), fc.uint8Array({maxLength: 300}), (list, log) => {
        const response = {resourceList: Buffer.from(list), log: Buffer.from(log)}
        const ours = encodeResponse(response)
        if (list.length > 0 && log.length > 0) expect(ours.equals(ref.responseSerialize(response))).to.equal(true)
        expect(plain(ref.responseDeserialize(ours))).to.deep.equal(plain(response))
        expect(plain(decodeResponse(ref.responseSerialize(response)))).to.deep.equal(plain(response))
      }),
      {numRuns: 300},
    )
    const big = {resourceList: Buffer.alloc(3 * 1024 * 1024 + 7, 'k'), log: Buffer.from('warning\n')}
    expect(encodeResponse(big).equals(ref.responseSerialize(big))).to.equal(true)
  })

  it('a bytes field is read as a view of the message, not copied', () => {
    const message = encodeRequest({resourceList: Buffer.from('kind: ResourceList\n'), image: 'x'})
    const request = decodeRequest(message)
    expect(request.resourceList.buffer).to.equal(message.buffer)
    expect(request.resourceList.byteOffset).to.equal(message.byteOffset + 2)
  })

  it('grpc.health.v1: Check requests and responses as grpc-health-check\'s proto codes them, every status', () => {
    for (const method of ['Check', 'Watch'] as const) {
      const ref = referenceHealth(method)
      for (const service of ['', 'evaluator.FunctionEvaluator', 'ünïcode']) {
        const ours = encodeCheckRequest({service})
        if (service !== '') expect(ours.equals(ref.requestSerialize({service}))).to.equal(true)
        expect(ref.requestDeserialize(ours)).to.deep.equal({service})
        expect(decodeCheckRequest(ref.requestSerialize({service}))).to.deep.equal({service})
      }
      for (const status of SERVING_STATUSES) {
        const ours = encodeCheckResponse({status})
        if (status !== 'UNKNOWN') expect(ours.equals(ref.responseSerialize({status}))).to.equal(true)
        expect(ref.responseDeserialize(ours)).to.deep.equal({status})
        expect(decodeCheckResponse(ref.responseSerialize({status}))).to.deep.equal({status})
      }
    }
    // a status a later protocol version might add is given as its number
    expect(decodeCheckResponse(hex('0807'))).to.deep.equal({status: 7})
  })

  describe('reading as Go\'s protobuf does', () => {
    const image = hex('1203 696d67') // field 2 "img"
    it('skips fields it does not know, of every wire type, groups with nested fields too', () => {
      const unknown = [
        hex('18 96 01'), // 3: varint 150
        hex('21 0102030405060708'), // 4: fixed64
        hex('2a 03 616263'), // 5: length-delimited
        hex('33 08 01 3b 40 05 3c 34'), // 6: a group holding a varint and a nested group 7 (holding a varint)
        hex('3d 01020304'), // 7: fixed32
      ]
      const message = Buffer.concat([unknown[0]!, image, ...unknown.slice(1), hex('0a 01 61')])
      expect(plain(decodeRequest(message))).to.deep.equal({resourceList: '61', image: 'img'})
      // the reference reads the same
      expect(plain(referenceEvaluateFunction().requestDeserialize(message))).to.deep.equal({resourceList: '61', image: 'img'})
    })

    it('a known field of another wire type is skipped; a field that comes twice keeps its last value', () => {
      expect(plain(decodeRequest(Buffer.concat([hex('10 05'), image])))).to.deep.equal({resourceList: '', image: 'img'})
      expect(plain(decodeRequest(Buffer.concat([image, hex('1201 78')])))).to.deep.equal({resourceList: '', image: 'x'})
    })

    it('refuses malformed messages, and strings that are not UTF-8, with a WireError that says what is wrong', () => {
      const cases: Array<[string, RegExp]> = [
        ['0a', /ends inside a varint/],
        ['0a 05 6162', /field of 5 bytes runs past the end/],
        ['0a ffffffffffffffffffff01', /varint longer than 10 bytes/],
        ['02 00', /invalid field number 0/],
        ['0e', /invalid wire type 6/],
        ['0f', /invalid wire type 7/],
        ['1c', /unexpected end of group 3/],
        ['1b 08 01', /group 3 has no end/],
        ['1b 24', /group 3 ends as group 4/],
        ['19 0102', /ends inside a fixed-size field/],
        // image (a string) that is not UTF-8: proto3 says strings are UTF-8, and Go refuses it
        ['12 02 c328', /string field contains invalid UTF-8/],
        ['12 03 eda080', /string field contains invalid UTF-8/],
      ]
      for (const [bytes, words] of cases) {
        expect(() => decodeRequest(hex(bytes)), bytes).to.throw(WireError, words)
      }
      expect(() => decodeCheckRequest(hex('0a 01 ff'))).to.throw(WireError, /invalid UTF-8/)
      // bytes fields take any bytes
      expect(decodeRequest(hex('0a 02 c328')).resourceList.toString('hex')).to.equal('c328')
    })

    it('MessageWriter leaves empty and zero fields out and writes the others in order', () => {
      expect(new MessageWriter().bytes(1, '').varint(2, 0).bytes(3, Buffer.alloc(0)).finish().length).to.equal(0)
      expect(new MessageWriter().varint(2, 300).bytes(20, 'a').finish().toString('hex')).to.equal('10ac02' + 'a20101' + '61')
    })
  })

  describe('on a server', () => {
    class Echo implements Evaluator {
      readonly name = 'echo'
      async evaluate(req: EvaluationRequest) {
        return {resourceList: Buffer.from(`${req.image}|${req.resourceList.toString()}`), log: Buffer.alloc(0), evaluator: this.name}
      }
      async close() {}
    }
    let server: EvaluatorServer
    let raw: grpc.Client & {call(b: Buffer, cb: (e: grpc.ServiceError | null, r?: Buffer) => void): void}
    before(async () => {
      server = new EvaluatorServer({evaluator: new Echo(), maxMessageSize: 1 << 20, host: '127.0.0.1', port: 0})
      const port = await server.start()
      server.setServing(true)
      // a client that sends the bytes it is given, as a newer or a broken client would
      const Raw = grpc.makeGenericClientConstructor(
        {call: {path: EVALUATE_METHOD_PATH, requestStream: false, responseStream: false, requestSerialize: (b: Buffer) => b, requestDeserialize: (b: Buffer) => b, responseSerialize: (b: Buffer) => b, responseDeserialize: (b: Buffer) => b}},
        'Raw',
      )
      raw = new Raw(`127.0.0.1:${port}`, grpc.credentials.createInsecure()) as unknown as typeof raw
    })
    after(() => {
      raw.close()
      server.forceShutdown()
    })
    const send = (bytes: Buffer): Promise<{err: grpc.ServiceError | null; res?: Buffer}> => new Promise((resolve) => raw.call(bytes, (err, res) => resolve({err, res})))

    it('serves a request with fields it does not know (a newer client\'s), and refuses a malformed one INTERNAL, as grpc-go does, then serves the next', async () => {
      const newer = Buffer.concat([encodeRequest({resourceList: Buffer.from('kind: ResourceList'), image: 'fn:v1'}), hex('1801 2a0278 79')])
      const ok = await send(newer)
      expect(ok.err).to.equal(null)
      expect(decodeResponse(ok.res!).resourceList.toString()).to.equal('fn:v1|kind: ResourceList')
      const bad = await send(hex('0a 09 6162'))
      expect(bad.err?.code).to.equal(grpc.status.INTERNAL)
      expect(bad.err?.details).to.match(/^Error deserializing request/)
      const again = await send(encodeRequest({resourceList: Buffer.from('x'), image: 'i'}))
      expect(decodeResponse(again.res!).resourceList.toString()).to.equal('i|x')
    })
  })
})
