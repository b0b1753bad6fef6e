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
    // schema validation (src/lib/schema/) and ajv load only where a config is validated
    expect(bundle).not.to.match(/\bajv\b|x-kubernetes-validations/)
  })

  it('ajv is loaded on the first validation: no module imports it at load time', async () => {
    const {readdir} = await import('node:fs/promises')
    const files = (await readdir(path.join(REPO_ROOT, 'src'), {recursive: true})).filter((f) => f.endsWith('.ts'))
    const importing: string[] = []
    for (const f of files) {
      const text = await readFile(path.join(REPO_ROOT, 'src', f), 'utf8')
      if (/^import (?!type )[^\n]*from 'ajv'/m.test(text)) importing.push(f)
    }
    expect(importing).to.deep.equal([])
  })
})
