/**
 * Outputs at the message size limit, fnr serve and Porch's runner v1.5.8 side by side
 * (docs/grpc.md). Go's protobuf leaves an empty `log` out of the response; fnr wrote it (2 bytes), so an
 * output of 6 MiB - 6 or - 5 bytes, which Porch's runner sends, failed RESOURCE_EXHAUSTED in fnr.
 * Both runners get the same config and function; a raw gRPC client (no decoding) reads what each
 * sends, and the bytes must be the same.
 */
import {mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'

import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'
import {stringify} from 'yaml'

import {buildPorchRunner} from '../../scripts/catalog-peers.mjs'
import {BUILD_TIMEOUT_MS} from '../catalog/support.js'
import {startServeProcess, type ServeProcess} from '../support/serve.js'
import {TempDirs, writeExecutable} from '../support/tmp.js'
import {callRaw, startPorchRunner, stopRunners, type PorchRunner, type RawReply, type RunnerBed} from './support.js'

const MAX = 6 * 1024 * 1024

function varint(n: number): Buffer {
  const out: number[] = []
  let v = n
  while (v > 0x7f) {
    out.push((v & 0x7f) | 0x80)
    v = Math.floor(v / 128)
  }
  out.push(v)
  return Buffer.from(out)
}

/** EvaluateFunctionRequest: resource_list (1), image (2). */
function request(resourceList: Buffer, image: string): Buffer {
  const img = Buffer.from(image)
  return Buffer.concat([Buffer.of(0x0a), varint(resourceList.length), resourceList, Buffer.of(0x12), varint(img.length), img])
}

describe('outputs at the message size limit: fnr serve and Porch\'s runner send the same bytes', function () {
  this.timeout(BUILD_TIMEOUT_MS)
  const temp = new TempDirs()
  let fnr: ServeProcess | undefined
  let porch: PorchRunner | undefined

  before(async function () {
    this.timeout(BUILD_TIMEOUT_MS)
    const porchServer = buildPorchRunner().server
    const work = await temp.make('fnr-response-size-')
    const functionsDir = path.join(work, 'functions')
    await mkdir(functionsDir)
    // N bytes of output (N from the first line of the input), nothing on stderr
    await writeExecutable(path.join(functionsDir, 'sized'), '#!/bin/sh\nread n\ncat >/dev/null\nhead -c "$n" /dev/zero | tr "\\0" "a"\n')
    await writeExecutable(path.join(functionsDir, 'noisy'), '#!/bin/sh\nread n\ncat >/dev/null\necho "said on stderr" >&2\nhead -c "$n" /dev/zero | tr "\\0" "a"\n')
    const configPath = path.join(work, 'config.yaml')
    await writeFile(configPath, stringify({functions: [{function: 'sized', images: ['example.com/sized:v1']}, {function: 'noisy', images: ['example.com/noisy:v1']}]}))
    const bed: RunnerBed = {functionsDir, configPath}
    fnr = await startServeProcess([`--config=${configPath}`, `--functions=${functionsDir}`, '--disable-runtimes=pod', `--max-request-body-size=${MAX}`])
    porch = await startPorchRunner(porchServer, bed)
  })

  after(async () => {
    await stopRunners(fnr, porch)
    await temp.cleanup()
  })

  const call = (port: number, size: number, image = 'example.com/sized:v1'): Promise<RawReply> => callRaw(port, request(Buffer.from(`${size}\n`), image), 4 * MAX)

  // 6 MiB - 5 is the exact limit: 1 tag byte + 4 length bytes + the output = 6 MiB.
  for (const under of [6, 5]) {
    it(`an output of 6 MiB - ${under} bytes: both send it, byte for byte the same response (no empty log field)`, async () => {
      const [fromFnr, fromPorch] = [await call(fnr!.port, MAX - under), await call(porch!.port, MAX - under)]
      expect(fromPorch.code, `porch: ${fromPorch.details}`).to.equal(undefined)
      expect(fromFnr.code, `fnr: ${fromFnr.details}`).to.equal(undefined)
      expect(fromPorch.bytes!.length).to.equal(MAX - under + 5)
      expect(fromFnr.bytes!.subarray(0, 8).toString('hex')).to.equal(fromPorch.bytes!.subarray(0, 8).toString('hex'))
      expect(fromFnr.bytes!.length).to.equal(fromPorch.bytes!.length)
      expect(Buffer.compare(fromFnr.bytes!, fromPorch.bytes!)).to.equal(0)
    })
  }

  it('an output of 6 MiB - 4 bytes (one over): RESOURCE_EXHAUSTED from both', async () => {
    const [fromFnr, fromPorch] = [await call(fnr!.port, MAX - 4), await call(porch!.port, MAX - 4)]
    expect(fromPorch.code, `porch: ${fromPorch.details}`).to.equal(grpc.status.RESOURCE_EXHAUSTED)
    expect(fromFnr.code, `fnr: ${fromFnr.details}`).to.equal(grpc.status.RESOURCE_EXHAUSTED)
    expect(fromFnr.details).to.equal(`function "example.com/sized:v1" returned ${MAX - 4} bytes, more than fit in the maximum message size ${MAX} (the response adds 5 bytes of framing)`)
  })

  it('a small output with stderr: the same bytes (both fields written)', async () => {
    const [fromFnr, fromPorch] = [await call(fnr!.port, 100, 'example.com/noisy:v1'), await call(porch!.port, 100, 'example.com/noisy:v1')]
    expect(fromPorch.bytes!.subarray(-17).equals(Buffer.concat([Buffer.of(0x12, 15), Buffer.from('said on stderr\n')]))).to.equal(true)
    expect(Buffer.compare(fromFnr.bytes!, fromPorch.bytes!)).to.equal(0)
  })
})
