import {expect} from 'chai'

import {KPTFILE, deployment, resourceList, runOk} from './support.js'

const FN = 'remove-local-config-resources'

describe('functions/remove-local-config-resources', () => {
  it('drops local-config resources and lists them', async () => {
    const local = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name: 'setters',
        annotations: {'config.kubernetes.io/local-config': 'TRUE', 'internal.config.kubernetes.io/path': 'setters.yaml'},
      },
    }
    const notLocal = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {name: 'kept', annotations: {'config.kubernetes.io/local-config': 'false'}},
    }
    const out = await runOk(FN, resourceList([KPTFILE, deployment('web'), local, notLocal]))
    expect(out.items.map((i) => i.metadata.name)).to.deep.equal(['web', 'kept'])
    expect(out.results.map((r) => [r.severity, r.message])).to.deep.equal([
      ['info', 'Number of resources pruned: 2'],
      ['info', 'Resource name: [pkg]'],
      ['info', 'Resource name: [setters]'],
    ])
    expect(out.results[2].file).to.deep.equal({path: 'setters.yaml'})
  })

  it('warns when there is nothing to remove', async () => {
    const out = await runOk(FN, resourceList([deployment('web')]))
    expect(out.items).to.have.length(1)
    expect(out.results).to.deep.equal([{message: 'Found no resources to prune with the local config annotation', severity: 'warning'}])
  })
})
