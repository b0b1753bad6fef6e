import {expect} from 'chai'

import {configMap, parseOutput, runFunction, runOk} from './support.js'

const FN = 'apply-setters'

function input(data: Record<string, string> | undefined): string {
  const fc = data === undefined
    ? ''
    : `functionConfig:\n  apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: function-input\n  data:\n${Object.entries(data)
      .map(([k, v]) => `    ${k}: ${JSON.stringify(v)}\n`)
      .join('')}`
  return `apiVersion: config.kubernetes.io/v1
kind: ResourceList
items:
- apiVersion: apps/v1
  kind: Deployment
  metadata:
    name: web # kpt-set: \${app}
    annotations:
      internal.config.kubernetes.io/path: 'deploy.yaml'
      internal.config.kubernetes.io/index: '0'
  spec:
    replicas: 1 # kpt-set: \${replicas}
    template:
      spec:
        containers:
        - name: web
          image: nginx:1.7 # kpt-set: \${image}:\${tag}
          args: # kpt-set: \${args}
          - a
          - b
          env: [x] # kpt-set: \${env}
${fc}`
}

describe('functions/apply-setters', () => {
  it('sets whole and partial scalar values, keeping the setter comments', async () => {
    const out = await runOk(FN, input({tag: '1.8', replicas: '3', app: 'shop'}))
    expect(out.stdout).to.contain('    name: shop # kpt-set: ${app}\n')
    expect(out.stdout).to.contain('    replicas: 3 # kpt-set: ${replicas}\n')
    expect(out.stdout).to.contain('          image: nginx:1.8 # kpt-set: ${image}:${tag}\n')
    expect(out.items[0].spec.replicas).to.equal(3)
    expect(out.results.map((r) => [r.field.path, r.message])).to.deep.equal([
      ['metadata.name', 'set field value to "shop"'],
      ['spec.replicas', 'set field value to "3"'],
      ['spec.template.spec.containers[0].image', 'set field value to "nginx:1.8"'],
    ])
    expect(out.results[2]).to.deep.include({
      severity: 'info',
      // the resource as it is written out (its name was set too)
      resourceRef: {apiVersion: 'apps/v1', kind: 'Deployment', name: 'shop'},
      file: {path: 'deploy.yaml', index: 0},
    })
  })

  it('replaces list values from a YAML list, in block style, and empties them', async () => {
    const out = await runOk(FN, input({args: '[--verbose, --port=8080]', env: ''}))
    expect(out.stdout).to.contain('          args: # kpt-set: ${args}\n          - --verbose\n          - --port=8080\n')
    expect(out.stdout).to.contain('          env: [] # kpt-set: ${env}\n')
    const c = out.items[0].spec.template.spec.containers[0]
    expect(c.args).to.deep.equal(['--verbose', '--port=8080'])
    expect(c.env).to.deep.equal([])
  })

  it('says so when no field matches, and changes nothing', async () => {
    for (const data of [{unknown: 'x'}, undefined]) {
      const before = input(data)
      const out = await runOk(FN, before)
      expect(out.results).to.deep.equal([{message: 'no matches for input setter(s)', severity: 'info'}])
      expect(out.stdout).to.contain(before.split('functionConfig:')[0].split('items:\n')[1])
    }
  })

  it('fails on a setter it cannot resolve and on a bad list value', async () => {
    const src = input({image: 'ubuntu'}).replace('nginx:1.7 # kpt-set: ${image}:${tag}', 'nginx # kpt-set: ${image}:${tag}')
    const r = await runFunction(FN, src)
    expect(r.code).to.equal(1)
    const out = parseOutput(r.stdout)
    expect(out.results).to.have.length(1)
    expect(out.results[0]).to.include({severity: 'error', message: 'failed to apply setters: values for setters [${tag}] must be provided'})
    const bad = await runFunction(FN, input({args: 'not-a-list'}))
    expect(bad.code).to.equal(1)
    expect(parseOutput(bad.stdout).results[0].message).to.contain('input to array setter must be an array of values')
  })

  it('reads kpt default functionConfig arguments', async () => {
    const out = await runOk(FN, {
      apiVersion: 'config.kubernetes.io/v1',
      kind: 'ResourceList',
      items: [{apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'cm'}, data: {k: 'v'}}],
      functionConfig: configMap({k: 'x'}),
    })
    expect(out.results[0].message).to.equal('no matches for input setter(s)')
  })
})
