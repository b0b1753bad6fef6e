/** The `docker` the conformance suite gives kpt: catalog images run as the built binaries. */
import {expect} from 'chai'
import {execa} from 'execa'
import path from 'node:path'

import {TempDirs, writeExecutable} from '../support/tmp.js'
import {writeDockerShim} from './functions.js'

describe('conformance docker shim', () => {
  const temp = new TempDirs()
  after(() => temp.cleanup())

  it("answers docker version, runs a catalog image's binary with kpt's docker run line, and refuses the rest", async () => {
    const dir = await temp.make('fnr-docker-shim-')
    const fn = await writeExecutable(path.join(dir, 'fn with space'), '#!/bin/sh\necho "FOO=$FOO" >&2\nexec cat\n')
    const docker = await writeDockerShim(dir, new Map([['set-namespace', fn]]))
    expect((await execa(docker, ['version', '--format', '{{.Client.Version}}'])).stdout).to.match(/^\d+\.\d+\.\d+$/)
    const kptLine = (image: string, pull = 'missing'): string[] =>
      ['run', '--rm', '-i', '--network', 'none', '--user', 'nobody', '--security-opt=no-new-privileges', '--pull', pull, '-e', 'FOO=bar', image]
    for (const image of ['ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.2.0', 'gcr.io/kpt-fn/set-namespace@sha256:ab', 'set-namespace']) {
      const r = await execa(docker, kptLine(image), {input: 'kind: ResourceList\n'})
      expect([r.stdout, r.stderr]).to.deep.equal(['kind: ResourceList', 'FOO=bar'])
    }
    const missing = await execa(docker, kptLine('ghcr.io/kptdev/krm-functions-catalog/dne'), {reject: false})
    expect(missing.exitCode).to.equal(125)
    expect(missing.stderr).to.match(/docker: Error response from daemon: Head "https:\/\/ghcr\.io\/v2\/kptdev\/krm-functions-catalog\/dne\/manifests\/latest": denied/)
    const never = await execa(docker, kptLine('ghcr.io/kptdev/krm-functions-catalog/not-exist:latest', 'never'), {reject: false})
    expect(never.stderr).to.include('No such image: ghcr.io/kptdev/krm-functions-catalog/not-exist:latest')
    const other = await execa(docker, kptLine('ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.1.5'), {reject: false})
    expect([other.exitCode, other.stderr]).to.deep.equal([125, 'docker (conformance shim): image ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.1.5 is not built here'])
    expect((await execa(docker, ['pull', 'x'], {reject: false})).exitCode).to.equal(125)
  })
})
