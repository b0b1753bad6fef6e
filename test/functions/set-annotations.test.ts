import {expect} from 'chai'

import {KPTFILE, configMap, deployment, find, parseOutput, resourceList, runFunction, runOk, type Obj} from './support.js'

const FN = 'set-annotations'

describe('functions/set-annotations', () => {
  it('annotates metadata and workload pod templates, skipping local-config, with no results', async () => {
    const cron = {
      apiVersion: 'batch/v1',
      kind: 'CronJob',
      metadata: {name: 'cron'},
      spec: {jobTemplate: {spec: {template: {spec: {containers: []}}}}},
    }
    const svc = {apiVersion: 'v1', kind: 'Service', metadata: {name: 'svc'}, spec: {selector: {app: 'web'}}}
    const out = await runOk(FN, resourceList([KPTFILE, deployment('web'), cron, svc], configMap({owner: 'team-a', tier: 'web'})))
    const d = find(out.items, 'Deployment', 'web')
    expect(d.metadata.annotations).to.deep.equal({owner: 'team-a', tier: 'web'})
    expect(d.spec.template.metadata.annotations).to.deep.equal({owner: 'team-a', tier: 'web'})
    const c = find(out.items, 'CronJob', 'cron')
    expect(c.metadata.annotations).to.deep.equal({owner: 'team-a', tier: 'web'})
    expect(c.spec.jobTemplate.metadata.annotations).to.deep.equal({owner: 'team-a', tier: 'web'})
    expect(c.spec.jobTemplate.spec.template.metadata.annotations).to.deep.equal({owner: 'team-a', tier: 'web'})
    expect(find(out.items, 'Service', 'svc').spec).to.deep.equal({selector: {app: 'web'}})
    expect(find(out.items, 'Kptfile', 'pkg').metadata.annotations).to.deep.equal({'config.kubernetes.io/local-config': 'true'})
    expect(out.results).to.deep.equal([])
    expect(out.raw).to.not.have.property('results')
  })

  it('supports the typed config with additional fields, and keeps the orchestrator annotations', async () => {
    const typed = {
      apiVersion: 'fn.kpt.dev/v1alpha1',
      kind: 'SetAnnotations',
      metadata: {name: 'c'},
      annotations: {color: 'orange'},
      additionalAnnotationFields: [{group: 'dev.example.com', version: 'v1', kind: 'MyResource', path: 'spec/selector/annotations', create: true}],
    }
    const mine = {
      apiVersion: 'dev.example.com/v1',
      kind: 'MyResource',
      metadata: {
        name: 'r',
        annotations: {'internal.config.kubernetes.io/path': 'r.yaml', 'config.kubernetes.io/index': '0'},
      },
      spec: {},
    }
    const out = await runOk(FN, resourceList([mine], typed))
    expect(out.items[0].spec).to.deep.equal({selector: {annotations: {color: 'orange'}}})
    expect(out.items[0].metadata.annotations).to.deep.equal({
      'internal.config.kubernetes.io/path': 'r.yaml',
      'config.kubernetes.io/index': '0',
      color: 'orange',
    })
  })

  it('accepts the legacy SetAnnotationConfig with fieldSpecs', async () => {
    const legacy = {
      apiVersion: 'fn.kpt.dev/v1alpha1',
      kind: 'SetAnnotationConfig',
      metadata: {name: 'c'},
      annotations: {fruit: 'apple'},
      fieldSpecs: [{kind: 'Widget', path: 'spec/items[]/meta', create: false}],
    }
    const widget = {apiVersion: 'x.dev/v1', kind: 'Widget', metadata: {name: 'w'}, spec: {items: [{meta: {}}, {other: 1}]}}
    const out = await runOk(FN, resourceList([widget], legacy))
    expect(out.items[0].spec.items).to.deep.equal([{meta: {fruit: 'apple'}}, {other: 1}])
  })

  describe('bad functionConfig: error result and exit 1', () => {
    const cases: Array<[string, Obj | undefined, string]> = [
      ['kpt default (no arguments)', configMap({}), 'failed to configure function: input annotation list cannot be empty'],
      ['no functionConfig', undefined, 'failed to configure function: `functionConfig` must be a `ConfigMap` or `SetAnnotations`'],
      ['unknown kind', {apiVersion: 'v1', kind: 'Secret', metadata: {name: 'c'}}, '`functionConfig` must be a `ConfigMap` or `SetAnnotations`'],
      ['orchestrator annotation', configMap({'internal.config.kubernetes.io/path': 'x.yaml'}), 'is managed by the orchestrator and cannot be set'],
      ['legacy path annotation', configMap({'config.kubernetes.io/path': 'x.yaml'}), 'is managed by the orchestrator and cannot be set'],
      [
        'both field lists',
        {apiVersion: 'fn.kpt.dev/v1alpha1', kind: 'SetAnnotations', metadata: {name: 'c'}, annotations: {a: 'b'}, fieldSpecs: [], additionalAnnotationFields: []},
        '`fieldSpecs` has been deprecated',
      ],
    ]
    for (const [title, fc, message] of cases) {
      it(title, async () => {
        const r = await runFunction(FN, resourceList([deployment('web')], fc))
        expect(r.code).to.equal(1)
        expect(r.stderr).to.contain(message)
        const out = parseOutput(r.stdout)
        expect(out.results).to.have.length(1)
        expect(out.results[0].severity).to.equal('error')
        expect(out.results[0].message).to.contain(message)
        expect(out.items[0]).to.deep.equal(deployment('web'))
      })
    }
  })
})
