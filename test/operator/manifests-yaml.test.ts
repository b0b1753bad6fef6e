/** manifests/ read as YAML (no kustomize, no cluster); what kustomize builds from it and the control plane accepts is in ./manifests.test.ts. */
import {readFile, readdir} from 'node:fs/promises'
import path from 'node:path'

import {expect} from 'chai'
import {parseAllDocuments} from 'yaml'

import {REPO_ROOT} from '../support/serve.js'

const MANIFESTS = path.join(REPO_ROOT, 'manifests')

interface K8sObject {
  apiVersion: string
  kind: string
  metadata: {name: string; namespace?: string}
  [key: string]: unknown
}

describe('manifests/', () => {
  it('every file parses as YAML of Kubernetes objects', async () => {
    const files = (await readdir(MANIFESTS)).filter((f) => f.endsWith('.yaml'))
    expect(files).to.include('kustomization.yaml')
    for (const f of files) {
      const docs = parseAllDocuments(await readFile(path.join(MANIFESTS, f), 'utf8'))
      for (const d of docs) {
        expect(d.errors, f).to.deep.equal([])
        const o = d.toJS() as K8sObject
        expect(o.apiVersion, f).to.be.a('string')
        expect(o.kind, f).to.be.a('string')
      }
    }
  })
})
