import {expect} from 'chai'

import {KPTFILE, configMap, deployment, find, parseOutput, resourceList, runFunction, runOk, type Obj} from './support.js'

const FN = 'set-namespace'

describe('functions/set-namespace', () => {
  it('sets metadata.namespace on namespaced resources and reports info results', async () => {
    const input = resourceList(
      [
        KPTFILE,
        deployment('web'),
        {apiVersion: 'v1', kind: 'Service', metadata: {name: 'svc'}, spec: {selector: {app: 'web'}}},
        {apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'cfg', namespace: 'old'}, data: {a: 'b'}},
      ],
      configMap({namespace: 'prod'}),
    )
    const out = await runOk(FN, input)
    expect(find(out.items, 'Deployment', 'web').metadata.namespace).to.equal('prod')
    expect(find(out.items, 'Service', 'svc').metadata.namespace).to.equal('prod')
    expect(find(out.items, 'ConfigMap', 'cfg').metadata.namespace).to.equal('prod')
    expect(out.results).to.deep.equal([
      {message: 'namespace [default old] updated to "prod", 3 value(s) changed', severity: 'info'},
      {message: 'all `depends-on` annotations are up-to-date. no `namespace` changed', severity: 'info'},
    ])
  })

  it('leaves local-config resources alone', async () => {
    const localCm = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {name: 'local', namespace: 'old', annotations: {'config.kubernetes.io/local-config': 'true'}},
    }
    const out = await runOk(FN, resourceList([KPTFILE, localCm, deployment('web')], configMap({namespace: 'prod'})))
    expect(find(out.items, 'Kptfile', 'pkg').metadata).to.not.have.property('namespace')
    expect(find(out.items, 'ConfigMap', 'local').metadata.namespace).to.equal('old')
    expect(find(out.items, 'Deployment', 'web').metadata.namespace).to.equal('prod')
  })

  it('handles cluster-scoped kinds: renames Namespaces, updates subjects, CRD and APIService services', async () => {
    const items: Obj[] = [
      {apiVersion: 'v1', kind: 'Namespace', metadata: {name: 'example'}},
      {apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: {name: 'reader'}, rules: []},
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRoleBinding',
        metadata: {name: 'read-all'},
        roleRef: {apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'reader'},
        subjects: [
          {kind: 'ServiceAccount', name: 'default', namespace: 'example'},
          {apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'admins'},
        ],
      },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'RoleBinding',
        metadata: {name: 'rb', namespace: 'example'},
        roleRef: {apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'reader'},
        subjects: [{kind: 'ServiceAccount', name: 'sa', namespace: 'example'}],
      },
      {
        apiVersion: 'apiextensions.k8s.io/v1',
        kind: 'CustomResourceDefinition',
        metadata: {name: 'widgets.example.com'},
        spec: {conversion: {strategy: 'Webhook', webhook: {clientConfig: {service: {name: 'conv', namespace: 'example'}}}}},
      },
      {
        apiVersion: 'apiextensions.k8s.io/v1',
        kind: 'CustomResourceDefinition',
        metadata: {name: 'plain.example.com'},
        spec: {group: 'example.com'},
      },
      {
        apiVersion: 'apiregistration.k8s.io/v1',
        kind: 'APIService',
        metadata: {name: 'v1.example.com'},
        spec: {service: {name: 'api', namespace: 'example'}},
      },
      {apiVersion: 'storage.k8s.io/v1', kind: 'StorageClass', metadata: {name: 'fast'}},
    ]
    const out = await runOk(FN, resourceList(items, configMap({namespace: 'prod'})))
    expect(out.items.filter((i) => i.kind === 'Namespace').map((i) => i.metadata.name)).to.deep.equal(['prod'])
    expect(find(out.items, 'ClusterRole', 'reader').metadata).to.not.have.property('namespace')
    expect(find(out.items, 'StorageClass', 'fast').metadata).to.not.have.property('namespace')
    const crb = find(out.items, 'ClusterRoleBinding', 'read-all')
    expect(crb.metadata).to.not.have.property('namespace')
    expect(crb.subjects[0].namespace).to.equal('prod')
    expect(crb.subjects[1]).to.not.have.property('namespace')
    const rb = find(out.items, 'RoleBinding', 'rb')
    expect(rb.metadata.namespace).to.equal('prod')
    expect(rb.subjects[0].namespace).to.equal('prod')
    const crd = find(out.items, 'CustomResourceDefinition', 'widgets.example.com')
    expect(crd.metadata).to.not.have.property('namespace')
    expect(crd.spec.conversion.webhook.clientConfig.service.namespace).to.equal('prod')
    expect(find(out.items, 'CustomResourceDefinition', 'plain.example.com').spec).to.deep.equal({group: 'example.com'})
    expect(find(out.items, 'APIService', 'v1.example.com').spec.service.namespace).to.equal('prod')
    expect(out.results[0]).to.deep.equal({message: 'namespace [example] updated to "prod", 6 value(s) changed', severity: 'info'})
  })

  it('treats unknown kinds as namespaced only when they have metadata.namespace', async () => {
    const items = [
      {apiVersion: 'example.com/v1', kind: 'Widget', metadata: {name: 'scoped', namespace: 'old'}},
      {apiVersion: 'example.com/v1', kind: 'Widget', metadata: {name: 'unscoped'}},
    ]
    const out = await runOk(FN, resourceList(items, configMap({namespace: 'prod'})))
    expect(find(out.items, 'Widget', 'scoped').metadata.namespace).to.equal('prod')
    expect(find(out.items, 'Widget', 'unscoped').metadata).to.not.have.property('namespace')
  })

  it('updates depends-on references to resources of the package only', async () => {
    const items = [
      {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: {
          name: 'wordpress',
          namespace: 'default',
          annotations: {'config.kubernetes.io/depends-on': 'apps/namespaces/default/StatefulSet/mysql'},
        },
      },
      {apiVersion: 'apps/v1', kind: 'StatefulSet', metadata: {name: 'mysql', namespace: 'default'}},
      {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: {
          name: 'bar',
          namespace: 'default',
          annotations: {'config.kubernetes.io/depends-on': 'apps/namespaces/default/StatefulSet/outside'},
        },
      },
    ]
    const out = await runOk(FN, resourceList(items, configMap({namespace: 'prod'})))
    expect(find(out.items, 'Deployment', 'wordpress').metadata.annotations['config.kubernetes.io/depends-on'])
      .to.equal('apps/namespaces/prod/StatefulSet/mysql')
    expect(find(out.items, 'Deployment', 'bar').metadata.annotations['config.kubernetes.io/depends-on'])
      .to.equal('apps/namespaces/default/StatefulSet/outside')
    expect(out.results[1]).to.deep.equal({
      message: '`depends-on` annotation namespace [default] updated to "prod", 1 value(s) changed',
      severity: 'info',
    })
  })

  it('accepts the typed SetNamespace config and the kptfile.kpt.dev package context', async () => {
    const typed = {apiVersion: 'fn.kpt.dev/v1alpha1', kind: 'SetNamespace', metadata: {name: 'c'}, namespace: 'typed'}
    const a = await runOk(FN, resourceList([deployment('web')], typed))
    expect(a.items[0].metadata.namespace).to.equal('typed')
    const ctx = configMap({name: 'from-package'}, 'kptfile.kpt.dev')
    const b = await runOk(FN, resourceList([deployment('web')], ctx))
    expect(b.items[0].metadata.namespace).to.equal('from-package')
  })

  it('with namespaceMatcher changes only the matching namespaces', async () => {
    const items = [
      {apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'a', namespace: 'one'}},
      {apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'b', namespace: 'two'}},
      {apiVersion: 'v1', kind: 'Namespace', metadata: {name: 'one'}},
      {apiVersion: 'v1', kind: 'Namespace', metadata: {name: 'two'}},
    ]
    const out = await runOk(FN, resourceList(items, configMap({namespace: 'new', namespaceMatcher: 'one'})))
    expect(find(out.items, 'ConfigMap', 'a').metadata.namespace).to.equal('new')
    expect(find(out.items, 'ConfigMap', 'b').metadata.namespace).to.equal('two')
    expect(out.items.filter((i) => i.kind === 'Namespace').map((i) => i.metadata.name)).to.deep.equal(['new', 'two'])
  })

  it('refuses several upstream origin namespaces without a matcher', async () => {
    const upstream = (ns: string, name: string) => ({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {name, namespace: ns, annotations: {'internal.kpt.dev/upstream-identifier': `|ConfigMap|${ns}|${name}`}},
    })
    const r = await runFunction(FN, resourceList([upstream('a', 'x'), upstream('b', 'y')], configMap({namespace: 'prod'})))
    expect(r.code).to.equal(1)
    const out = parseOutput(r.stdout)
    expect(out.results).to.have.length(1)
    expect(out.results[0].severity).to.equal('error')
    expect(out.results[0].message).to.contain('expect a single upstream namespace, found [a b]')
  })

  it('is idempotent and says so', async () => {
    const items = [{apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'a', namespace: 'prod'}}]
    const out = await runOk(FN, resourceList(items, configMap({namespace: 'prod'})))
    expect(out.results[0]).to.deep.equal({message: 'all matching namespaces are already "prod". no value changed', severity: 'info'})
  })

  describe('bad functionConfig: error result and exit 1', () => {
    const cases: Array<[string, Obj | undefined, string]> = [
      ['kpt default (no arguments)', configMap({}), '`data.namespace` should not be empty'],
      ['no functionConfig', undefined, 'FunctionConfig is missing. Expect `ConfigMap` or `SetNamespace`'],
      ['empty typed config', {apiVersion: 'fn.kpt.dev/v1alpha1', kind: 'SetNamespace', metadata: {name: 'c'}}, '`namespace` should not be empty'],
      ['unknown kind', {apiVersion: 'example.com/v1', kind: 'Other', metadata: {name: 'c'}}, 'unknown functionConfig Kind=Other ApiVersion=example.com/v1'],
      ['empty package context', configMap({}, 'kptfile.kpt.dev'), '`data.name` should not be empty'],
      ['invalid namespace name', configMap({namespace: 'Not_Valid'}), 'is not a valid namespace name'],
    ]
    for (const [title, fc, message] of cases) {
      it(title, async () => {
        const input = resourceList([deployment('web')], fc)
        const r = await runFunction(FN, input)
        expect(r.code).to.equal(1)
        expect(r.stderr).to.contain(message)
        const out = parseOutput(r.stdout)
        expect(out.results).to.have.length(1)
        expect(out.results[0].severity).to.equal('error')
        expect(out.results[0].message).to.contain(message)
        expect(out.items[0].metadata).to.not.have.property('namespace')
      })
    }

    it('points the error at the functionConfig', async () => {
      const r = await runFunction(FN, resourceList([deployment('web')], configMap({})))
      expect(parseOutput(r.stdout).results[0].resourceRef).to.deep.equal({apiVersion: 'v1', kind: 'ConfigMap', name: 'function-input'})
    })
  })

  it('fails without output on input that is not a ResourceList', async () => {
    for (const input of ['', 'foo: [', 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n']) {
      const r = await runFunction(FN, input)
      expect(r.code, JSON.stringify(input)).to.equal(1)
      expect(r.stdout).to.equal('')
      expect(r.stderr).to.match(/^set-namespace: /)
    }
  })

  it('accepts JSON input and answers in block YAML', async () => {
    const input = JSON.stringify(resourceList([deployment('web')], configMap({namespace: 'prod'})))
    const out = await runOk(FN, input)
    expect(out.stdout).to.not.match(/[{[]\s*"/)
    expect(out.stdout).to.match(/^items:$/m)
    expect(out.items[0].metadata.namespace).to.equal('prod')
  })

  it('keeps a comment block that starts on the `- ` line together, above the first key', async () => {
    const input = `apiVersion: config.kubernetes.io/v1
kind: ResourceList
items:
# above the item
- # Copyright 2026
  #
  # Licensed under the Apache License
  apiVersion: v1
  kind: ConfigMap
  metadata:
    name: cfg
functionConfig:
  apiVersion: v1
  kind: ConfigMap
  metadata:
    name: function-input
  data:
    namespace: prod
`
    const out = await runOk(FN, input)
    expect(out.stdout).to.contain('items:\n# above the item\n- # Copyright 2026\n  #\n  # Licensed under the Apache License\n  apiVersion: v1\n')
  })

  it('keeps comments, field order, scalar styles and the orchestrator annotations', async () => {
    const input = `apiVersion: config.kubernetes.io/v1
kind: ResourceList
items:
- # leading comment
  apiVersion: apps/v1
  kind: Deployment
  metadata: # meta comment
    name: web # the web deployment
    annotations:
      config.kubernetes.io/index: '0'
      config.kubernetes.io/path: 'deploy.yaml'
      internal.config.kubernetes.io/index: '0'
      internal.config.kubernetes.io/path: 'deploy.yaml'
      internal.config.kubernetes.io/seqindent: 'compact'
      internal.config.kubernetes.io/id: '2'
      config.k8s.io/id: '2'
      octal: 010
      quoted: "42"
      yes-no: yes
  spec:
    replicas: 3
    template:
      spec:
        containers: # the containers
        - name: nginx
          args: [a, b] # flow
functionConfig:
  apiVersion: v1
  kind: ConfigMap
  metadata:
    name: function-input
  data:
    namespace: prod
`
    const out = await runOk(FN, input)
    const text = out.stdout
    expect(text).to.contain('- # leading comment\n  apiVersion: apps/v1\n')
    expect(text).to.contain('  metadata: # meta comment\n    name: web # the web deployment\n    namespace: prod\n')
    expect(text).to.contain('        containers: # the containers\n        - name: nginx\n')
    expect(text).to.contain('args: [a, b] # flow')
    for (const comment of ['# leading comment', '# meta comment', '# the web deployment', '# the containers', '# flow']) {
      expect(text.split(comment).length - 1, comment).to.equal(1)
    }
    for (const line of [
      "config.kubernetes.io/index: '0'",
      "config.kubernetes.io/path: 'deploy.yaml'",
      "internal.config.kubernetes.io/index: '0'",
      "internal.config.kubernetes.io/path: 'deploy.yaml'",
      "internal.config.kubernetes.io/seqindent: 'compact'",
      "internal.config.kubernetes.io/id: '2'",
      "config.k8s.io/id: '2'",
      'octal: 010',
      'quoted: "42"',
      'yes-no: yes',
    ]) {
      expect(text).to.contain(line)
    }
    expect(text.indexOf('kind: ResourceList')).to.be.lessThan(text.indexOf('items:'))
  })
})
