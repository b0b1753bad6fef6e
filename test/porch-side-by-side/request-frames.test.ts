/**
 * Request messages that are not valid EvaluateFunctionRequest protobuf, or barely valid
 * (test/support/reliability/inputs.ts frameCases), sent by a raw client to fnr serve and to Porch's
 * runner v1.5.8 in the same run, on the same config: fnr codes the protocol's messages itself
 * (src/lib/grpc/wire.ts), and must read what Go's protobuf reads and refuse what it refuses. A
 * message either runner cannot read is INTERNAL; one both read gets the same answer, except where
 * fnr checks the request before running it (an empty image or resource_list is INVALID_ARGUMENT in
 * fnr, NOT_FOUND or a function's failure in Porch's runner: docs/grpc.md).
 */
import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'

import {buildPorchRunner} from '../../scripts/catalog-peers.mjs'
import {BUILD_TIMEOUT_MS} from '../catalog/support.js'
import {frameCases} from '../support/reliability/inputs.js'
import {startServeProcess, type ServeProcess} from '../support/serve.js'
import {TempDirs} from '../support/tmp.js'
import {callRaw, runnerBed, startPorchRunner, stopRunners, type PorchRunner, type RawReply} from './support.js'

const show = (r: RawReply): string => (r.code === undefined ? `OK (${r.bytes!.length} bytes)` : `${grpc.status[r.code]}: ${r.details}`)

describe('malformed request messages: fnr serve reads and refuses what Porch\'s runner does', function () {
  this.timeout(BUILD_TIMEOUT_MS)
  const temp = new TempDirs()
  let fnr: ServeProcess | undefined
  let porch: PorchRunner | undefined

  before(async function () {
    this.timeout(BUILD_TIMEOUT_MS)
    const porchServer = buildPorchRunner().server
    const bed = await runnerBed(await temp.make('fnr-request-frames-'))
    fnr = await startServeProcess([`--config=${bed.configPath}`, `--functions=${bed.functionsDir}`, '--disable-runtimes=pod'])
    porch = await startPorchRunner(porchServer, bed)
  })

  after(async () => {
    await stopRunners(fnr, porch)
    await temp.cleanup()
  })

  const unreadable = (r: RawReply): boolean => r.code === grpc.status.INTERNAL && /deserializ|unmarshal/.test(r.details ?? '')
  /** fnr's own checks of a request it read (Porch's runner runs it): an empty image or resource_list. */
  const checkedByFnr = (ours: RawReply, theirs: RawReply): boolean =>
    ours.code === grpc.status.INVALID_ARGUMENT &&
    ((/^image is empty/.test(ours.details ?? '') && theirs.code === grpc.status.NOT_FOUND && theirs.details === 'function "" not found') ||
      (/^resource_list is empty/.test(ours.details ?? '') && theirs.code === undefined && theirs.bytes!.length === 0))

  for (const c of frameCases()) {
    it(c.label, async () => {
      const [ours, theirs] = [await callRaw(fnr!.port, c.bytes), await callRaw(porch!.port, c.bytes)]
      const said = `fnr ${show(ours)}; Porch's runner ${show(theirs)}`
      expect(unreadable(ours), said).to.equal(unreadable(theirs))
      if (unreadable(ours) || checkedByFnr(ours, theirs)) return
      expect(ours.code, said).to.equal(theirs.code)
      if (ours.code === undefined) expect(ours.bytes!.equals(theirs.bytes!), said).to.equal(true)
      else expect(ours.details, said).to.equal(theirs.details)
    })
  }

  it('every case was one of the three kinds: unreadable to both, read the same, or stopped by fnr\'s check of an empty field', () => {
    expect(frameCases().length).to.be.greaterThan(20)
  })
})
