import {expect} from 'chai'

import {KPTFILE, configMap, deployment, find, parseOutput, resourceList, runFunction, runOk, type Obj} from './support.js'

const FN = 'set-labels'

describe('functions/set-labels', () => {
  it('labels metadata, workload selectors and pod templates', async () => {
    const input = resourceList([KPTFILE, deployment('web')], configMap({env: 'prod', app: 'web2'}))
    const out = await runOk(FN, input)
    const d = find(out.items, 'Deployment', 'web')
    expect(d.metadata.labels).to.deep.equal({app: 'web2', env: 'prod'})
    expect(d.spec.selector.matchLabels).to.deep.equal({app: 'web2', env: 'prod'})
    expect(d.spec.template.metadata.labels).to.deep.equal({app: 'web2', env: 'prod'})
    expect(find(out.items, 'Kptfile', 'pkg').metadata).to.not.have.property('labels')
    expect(out.results).to.deep.equal([{message: 'set 6 labels in total', severity: 'info'}])
  })

  it('creates the Service selector and the metadata.labels map', async () => {
    const svc = {apiVersion: 'v1', kind: 'Service', metadata: {name: 'svc'}, spec: {ports: [{port: 80}]}}
    const cm = {apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'cm'}, data: {k: 'v'}}
    const out = await runOk(FN, resourceList([svc, cm], configMap({color: 'orange'})))
    expect(find(out.items, 'Service', 'svc').spec.selector).to.deep.equal({color: 'orange'})
    expect(find(out.items, 'Service', 'svc').metadata.labels).to.deep.equal({color: 'orange'})
    expect(find(out.items, 'ConfigMap', 'cm').metadata.labels).to.deep.equal({color: 'orange'})
    expect(find(out.items, 'ConfigMap', 'cm')).to.not.have.property('spec')
  })

  it('only overwrites existing keys of Job, PodDisruptionBudget and NetworkPolicy selectors', async () => {
    const job = {
      apiVersion: 'batch/v1',
      kind: 'Job',
      metadata: {name: 'job'},
      spec: {selector: {matchLabels: {app: 'old', keep: 'me'}}, template: {spec: {containers: []}}},
    }
    const pdb = {apiVersion: 'policy/v1', kind: 'PodDisruptionBudget', metadata: {name: 'pdb'}, spec: {selector: {matchLabels: {other: 'x'}}}}
    const np = {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: {name: 'np'},
      spec: {
        podSelector: {matchLabels: {app: 'old'}},
        ingress: [{from: [{podSelector: {matchLabels: {app: 'old'}}}, {namespaceSelector: {}}]}],
        egress: [{to: [{podSelector: {matchLabels: {role: 'db'}}}]}],
      },
    }
    const out = await runOk(FN, resourceList([job, pdb, np], configMap({app: 'new'})))
    const j = find(out.items, 'Job', 'job')
    expect(j.spec.selector.matchLabels).to.deep.equal({app: 'new', keep: 'me'})
    expect(j.spec.template.metadata.labels).to.deep.equal({app: 'new'})
    expect(find(out.items, 'PodDisruptionBudget', 'pdb').spec.selector.matchLabels).to.deep.equal({other: 'x'})
    const n = find(out.items, 'NetworkPolicy', 'np')
    expect(n.spec.podSelector.matchLabels).to.deep.equal({app: 'new'})
    expect(n.spec.ingress[0].from[0].podSelector.matchLabels).to.deep.equal({app: 'new'})
    expect(n.spec.ingress[0].from[1]).to.deep.equal({namespaceSelector: {}})
    expect(n.spec.egress[0].to[0].podSelector.matchLabels).to.deep.equal({role: 'db'})
  })

  it('handles CronJob job templates, StatefulSet claim templates and pod affinity selectors', async () => {
    const cron = {
      apiVersion: 'batch/v1',
      kind: 'CronJob',
      metadata: {name: 'cron'},
      spec: {jobTemplate: {spec: {template: {spec: {containers: []}}}}},
    }
    const sts = {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: {name: 'db'},
      spec: {
        selector: {matchLabels: {app: 'db'}},
        template: {
          metadata: {labels: {app: 'db'}},
          spec: {
            topologySpreadConstraints: [{labelSelector: {matchLabels: {app: 'db'}}}],
            affinity: {
              podAntiAffinity: {
                requiredDuringSchedulingIgnoredDuringExecution: [{labelSelector: {matchLabels: {app: 'db'}}}],
                preferredDuringSchedulingIgnoredDuringExecution: [{weight: 1, podAffinityTerm: {labelSelector: {matchLabels: {app: 'db'}}}}],
              },
            },
          },
        },
        volumeClaimTemplates: [{metadata: {name: 'data'}, spec: {accessModes: ['ReadWriteOnce']}}],
      },
    }
    const out = await runOk(FN, resourceList([cron, sts], configMap({app: 'x'})))
    const c = find(out.items, 'CronJob', 'cron')
    expect(c.spec.jobTemplate.metadata.labels).to.deep.equal({app: 'x'})
    expect(c.spec.jobTemplate.spec.template.metadata.labels).to.deep.equal({app: 'x'})
    const s = find(out.items, 'StatefulSet', 'db')
    expect(s.spec.selector.matchLabels).to.deep.equal({app: 'x'})
    expect(s.spec.template.spec.topologySpreadConstraints[0].labelSelector.matchLabels).to.deep.equal({app: 'x'})
    const anti = s.spec.template.spec.affinity.podAntiAffinity
    expect(anti.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchLabels).to.deep.equal({app: 'x'})
    expect(anti.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.labelSelector.matchLabels).to.deep.equal({app: 'x'})
    expect(s.spec.volumeClaimTemplates[0].metadata.labels).to.deep.equal({app: 'x'})
  })

  it('accepts the typed SetLabels config and quotes values that would not read back as strings', async () => {
    const typed = {apiVersion: 'fn.kpt.dev/v1alpha1', kind: 'SetLabels', metadata: {name: 'c'}, labels: {ready: 'true', n: '5', tier: 'web'}}
    const out = await runOk(FN, resourceList([{apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'cm'}}], typed))
    expect(out.items[0].metadata.labels).to.deep.equal({n: '5', ready: 'true', tier: 'web'})
    expect(out.stdout).to.contain('n: "5"')
    expect(out.stdout).to.contain('ready: "true"')
  })

  it('keeps the existing label order and comments, appending new labels sorted', async () => {
    const input = `apiVersion: config.kubernetes.io/v1
kind: ResourceList
items:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: cm
    labels:
      zeta: z # last
      alpha: a
functionConfig:
  apiVersion: v1
  kind: ConfigMap
  metadata:
    name: function-input
  data:
    zulu: "1"
    bravo: b
    alpha: A
`
    const out = await runOk(FN, input)
    expect(out.stdout).to.contain('    labels:\n      zeta: z # last\n      alpha: A\n      bravo: b\n      zulu: "1"\n')
  })

  it('warns about an empty typed labels map and changes nothing', async () => {
    const typed = {apiVersion: 'fn.kpt.dev/v1alpha1', kind: 'SetLabels', metadata: {name: 'c'}, labels: {}}
    const out = await runOk(FN, resourceList([deployment('web')], typed))
    expect(out.results).to.deep.equal([{message: 'no `labels` arguments are given in FunctionConfig', severity: 'warning'}])
    expect(out.items[0]).to.deep.equal(deployment('web'))
  })

  it('reports when there is nothing to label', async () => {
    const out = await runOk(FN, resourceList([KPTFILE], configMap({a: 'b'})))
    expect(out.results).to.deep.equal([{message: 'no input resources', severity: 'info'}])
  })

  describe('bad functionConfig: error result and exit 1', () => {
    const cases: Array<[string, Obj | undefined, string]> = [
      ['kpt default (no arguments)', configMap({}), '`FunctionConfig` is not given'],
      ['no functionConfig', undefined, '`FunctionConfig` is not given'],
      ['unknown kind', {apiVersion: 'fn.kpt.dev/v1alpha1', kind: 'BadKind', metadata: {name: 'c'}}, 'unknown FunctionConfig `BadKind.fn.kpt.dev`, expect `SetLabels.fn.kpt.dev` or `ConfigMap.v1`'],
      ['labels as a list', {apiVersion: 'fn.kpt.dev/v1alpha1', kind: 'SetLabels', metadata: {name: 'c'}, labels: [{color: 'orange'}]}, '`labels` must be a map of strings'],
      ['nested label value', {apiVersion: 'fn.kpt.dev/v1alpha1', kind: 'SetLabels', metadata: {name: 'c'}, labels: {a: {b: 'c'}}}, '`labels` must be a map of strings'],
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
