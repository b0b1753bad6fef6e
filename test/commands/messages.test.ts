/**
 * Messages a newcomer meets: did-you-mean for commands and flags (fast path and oclif alike), no
 * garbled parser errors, kpt's `--truncate-output=false` accepted (kpt's own hint names it),
 * `--timeout 0` meaning no timeout.
 */
import {expect} from 'chai'
import path from 'node:path'

import {closest} from '../../src/lib/flags/suggest.js'
import {runCli} from '../support/cli.js'
import {TempDirs, writeExecutable} from '../support/tmp.js'

const CM = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n'

describe('CLI messages', function () {
  this.timeout(60_000)
  const temp = new TempDirs()
  after(() => temp.cleanup())

  it('suggests the closest command or flag', async () => {
    const cases: Array<[string[], string]> = [
      [['evl'], 'fnr: unknown command "fnr evl"; did you mean "fnr eval"?'],
      [['pods', 'lst'], 'did you mean "fnr pods ls"?'],
      [['eval', '--exit-codes', 'fnr', '--exce', 'x'], 'fnr: Nonexistent flag: --exce; did you mean --exec? (see --help)'],
      [['test', 'x', '--imag', 'y'], 'did you mean --image?'],
      [['render', '--exit-codes=fnr', '--alow-exec'], 'did you mean --allow-exec?'],
    ]
    for (const [args, text] of cases) {
      for (const env of [{}, {FNR_NO_FAST_PATH: '1'}]) {
        const r = await runCli(args, {env})
        expect(r.exitCode, args.join(' ')).to.equal(2)
        expect(r.stderr, args.join(' ')).to.contain(text)
        expect(r.stderr.trim().split('\n'), args.join(' ')).to.have.length(1)
      }
    }
    expect(closest('zzzz', ['eval', 'test'])).to.equal(undefined)
    // kpt's form on its own commands (the default): kpt's words, exit 1.
    for (const args of [['eval', '--exce', 'x'], ['render', '--alow-exec']]) {
      for (const env of [{}, {FNR_NO_FAST_PATH: '1'}]) {
        const r = await runCli(args, {env})
        expect(r.exitCode, args.join(' ')).to.equal(1)
        expect(r.stderr.trimEnd(), args.join(' ')).to.equal(`error: unknown flag: ${args[1]}`)
      }
    }
  })

  it('parser errors read as one clean line', async () => {
    const r = await runCli(['image', 'inspect'])
    expect(r.exitCode).to.equal(2)
    expect(r.stderr.trim()).to.equal('fnr: Missing 1 required arg: image (see --help)')
    const f = await runCli(['eval', '--exce'])
    expect(f.stderr).not.to.contain('To specify a positional')
  })

  it('accepts kpt\'s --truncate-output=false (the hint kpt and fnr print) on eval and render', async () => {
    const dir = await temp.make('fnr-msg-')
    const fn = await writeExecutable(path.join(dir, 'noisy'), '#!/bin/sh\nfor i in 1 2 3 4 5 6 7; do echo "line $i" >&2; done\nexec cat\n')
    const short = await runCli(['eval', '-', '--exec', fn], {input: CM})
    expect(short.stderr).to.contain("use '--truncate-output=false' to disable")
    for (const env of [{}, {FNR_NO_FAST_PATH: '1'}]) {
      const r = await runCli(['eval', '-', '--exec', fn, '--truncate-output=false'], {input: CM, env})
      expect(r.exitCode, r.stderr).to.equal(0)
      expect(r.stderr).to.contain('"line 7"')
    }
  })

  it('--timeout 0 means no timeout', async () => {
    const dir = await temp.make('fnr-msg-timeout-')
    const fn = await writeExecutable(path.join(dir, 'slow'), '#!/bin/sh\nsleep 1\nexec cat\n')
    const r = await runCli(['eval', '-', '--exec', fn, '--timeout', '0'], {input: CM})
    expect(r.exitCode, r.stderr).to.equal(0)
    expect(r.stdout).to.contain('name: a')
  })
})
