import {expect} from 'chai'
import path from 'node:path'

import {readServeArgs} from '../../src/cli/fast-serve.js'

// bin/run.js starts `fnr serve` through readServeArgs without oclif, and gives oclif every command
// line readServeArgs returns undefined for (oclif then reports errors as it always has).
describe('fnr serve without oclif: which command lines it takes', () => {
  const config = path.resolve('functions', 'config.yaml')
  const functions = path.resolve('functions')

  it("reads Porch's Deployment arguments, Go spellings included, into the command's options", () => {
    const read = readServeArgs(['-port=0', `--config=${config}`, `--functions=${functions}`, '--pod-namespace=porch-fn-system', '--max-request-body-size=6291456', '-disable-runtimes=pod', '--log-level=1', '--warm-up-pod-cache'])
    expect(read).to.not.equal(undefined)
    expect(read!.options.port).to.equal(0)
    expect(read!.options.maxRequestBodySize).to.equal(6291456)
    expect(read!.options.disableRuntimes).to.equal('pod')
    expect(read!.options.exec.configPath).to.equal(config)
    expect(read!.options.pod.namespace).to.equal('porch-fn-system')
    expect(read!.options.pod.warmUp).to.equal(true)
    expect(read!.options.gracePeriodMs).to.equal(25_000)
    expect(read!.verbosity).to.equal(1)
    expect(read!.logFormat).to.equal(undefined)
  })

  it('reads --log-format and durations', () => {
    const read = readServeArgs(['--log-format=text', '--grace-period=3s', '--disable-runtimes=pod'])
    expect(read!.logFormat).to.equal('text')
    expect(read!.options.gracePeriodMs).to.equal(3000)
  })

  for (const argv of [
    ['--port', '0'],
    ['--nope=1'],
    ['--port=abc'],
    ['--grace-period=soon'],
    ['--log-format=xml'],
    ['--disable-runtimes=exec,pod'],
    ['extra'],
    ['--functions'],
    // oclif: "can only be specified once" (the fast path once started on the last one and never exited)
    ['--disable-runtimes=pod', '--port=1', '--port=2'],
  ]) {
    it(`leaves ${JSON.stringify(argv)} to oclif`, () => {
      expect(readServeArgs(argv)).to.equal(undefined)
    })
  }
})
