import {expect} from 'chai'
import {readFile} from 'node:fs/promises'
import path from 'node:path'

import {REPO_ROOT} from '../support/serve.js'

describe('heavy modules stay off the eval path', () => {
  it('the fnr eval bundle contains neither the Kubernetes client nor gRPC', async () => {
    const bundle = await readFile(path.join(REPO_ROOT, 'dist', 'bundles', 'eval', 'fast-eval.bundle.mjs'), 'utf8')
    expect(bundle.length).to.be.greaterThan(10_000)
    expect(bundle).not.to.match(/CoreV1Api|@kubernetes\/client-node/)
    expect(bundle).not.to.match(/@grpc\/grpc-js|grpc\.health\.v1/)
    expect(bundle).not.to.match(/@oclif\/core/)
  })
})
