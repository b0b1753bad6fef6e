/** manifests/ read as YAML (no kustomize, no cluster); what kustomize builds from it and the control plane accepts is in ./manifests.test.ts. */
import {readFile, readdir} from 'node:fs/promises'
import path from 'node:path'

import {expect} from 'chai'
import {parseAllDocuments} from 'yaml'

import {MANIFESTS, type K8sObject} from '../support/manifests.js'

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
