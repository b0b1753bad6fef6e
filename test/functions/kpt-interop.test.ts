/**
 * fnr's functions under the real kpt (/usr/bin/kpt, 1.0.0-beta.56) with the exec runtime, on a
 * copy of examples/hello.
 */
import {expect} from 'chai'
import {cp, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {parse, parseAllDocuments} from 'yaml'

import {EXAMPLES_DIR, FUNCTIONS_DIR, KPT, type Obj, makeTempDir, removeTempDir, requireKpt, runProcess} from './support.js'

const HELLO = path.join(EXAMPLES_DIR, 'hello')

function kpt(args: string[]) {
  return runProcess(KPT, args, '')
}

function docs(text: string): Obj[] {
  return parseAllDocuments(text).map((d) => d.toJS() as Obj)
}

function commentLines(text: string): string[] {
  return text.split('\n').filter((l) => l.includes('#')).map((l) => l.slice(l.indexOf('#')))
}

/** Every comment of the original file is still there, exactly once. */
function expectCommentsKept(before: string, after: string): void {
  const original = commentLines(before)
  expect(original.length).to.be.greaterThan(0)
  for (const c of original) expect(after.split(c).length - 1, `comment ${JSON.stringify(c)}`).to.equal(1)
}

describe('functions under kpt fn eval/render (interop)', function () {
  let tmp: string | undefined
  let pkg: string
  let resultsDir: string
  const original: Record<string, string> = {}

  before(async () => {
    await requireKpt()
    for (const f of ['Kptfile', 'deploy.yaml', 'config/settings.yaml']) original[f] = await readFile(path.join(HELLO, f), 'utf8')
  })

  beforeEach(async () => {
    tmp = await makeTempDir('kpt')
    pkg = path.join(tmp, 'hello')
    resultsDir = path.join(tmp, 'results')
    await cp(HELLO, pkg, {recursive: true})
  })

  afterEach(async () => {
    await removeTempDir(tmp)
    tmp = undefined
  })

  const read = (f: string) => readFile(path.join(pkg, f), 'utf8')

  it('set-namespace: kpt fn eval --exec functions/set-namespace -- namespace=prod', async () => {
    const r = await kpt(['fn', 'eval', pkg, '--exec', 'functions/set-namespace', '--results-dir', resultsDir, '--', 'namespace=prod'])
    expect(r.code, r.stderr).to.equal(0)
    expect(r.stderr).to.contain('[PASS] "functions/set-namespace"')
    expect(r.stderr).to.contain('[info]: namespace [default hello] updated to "prod", 3 value(s) changed')

    const deploy = await read('deploy.yaml')
    expect(deploy).to.equal(
      original['deploy.yaml']
        .replace('  labels:\n    app: hello\nspec:', '  labels:\n    app: hello\n  namespace: prod\nspec:')
        .replace('kind: Service\nmetadata:\n  name: hello\n', 'kind: Service\nmetadata:\n  name: hello\n  namespace: prod\n'),
    )
    expect(docs(deploy).map((d) => [d.kind, d.metadata.namespace])).to.deep.equal([['Deployment', 'prod'], ['Service', 'prod']])
    expectCommentsKept(original['deploy.yaml'], deploy)

    const settings = await read('config/settings.yaml')
    expect(settings).to.equal(original['config/settings.yaml'].replace('namespace: hello', 'namespace: prod'))
    expect(await read('Kptfile')).to.equal(original.Kptfile)

    const results = parse(await readFile(path.join(resultsDir, 'results.yaml'), 'utf8')) as Obj
    expect(results).to.deep.include({apiVersion: 'kpt.dev/v1', kind: 'FunctionResultList', exitCode: 0})
    expect(results.items).to.have.length(1)
    expect(results.items[0]).to.deep.equal({
      exec: 'functions/set-namespace',
      exitCode: 0,
      results: [
        {message: 'namespace [default hello] updated to "prod", 3 value(s) changed', severity: 'info'},
        {message: 'all `depends-on` annotations are up-to-date. no `namespace` changed', severity: 'info'},
      ],
    })
  })

  it('set-labels: selectors and templates follow, comments stay', async () => {
    const r = await kpt(['fn', 'eval', pkg, '--exec', path.join(FUNCTIONS_DIR, 'set-labels'), '--results-dir', resultsDir, '--', 'env=prod'])
    expect(r.code, r.stderr).to.equal(0)
    const deploy = await read('deploy.yaml')
    const [d, s] = docs(deploy)
    expect(d.metadata.labels).to.deep.equal({app: 'hello', env: 'prod'})
    expect(d.spec.selector.matchLabels).to.deep.equal({app: 'hello', env: 'prod'})
    expect(d.spec.template.metadata.labels).to.deep.equal({app: 'hello', env: 'prod'})
    expect(s.metadata.labels).to.deep.equal({env: 'prod'})
    expect(s.spec.selector).to.deep.equal({app: 'hello', env: 'prod'})
    expectCommentsKept(original['deploy.yaml'], deploy)
    expect(docs(await read('config/settings.yaml'))[0].metadata.labels).to.deep.equal({env: 'prod'})
    expect(await read('Kptfile')).to.equal(original.Kptfile)
    const results = parse(await readFile(path.join(resultsDir, 'results.yaml'), 'utf8')) as Obj
    expect(results.items[0].results).to.deep.equal([{message: 'set 6 labels in total', severity: 'info'}])
  })

  it('a bad functionConfig fails the kpt run, changes nothing and lands in results.yaml', async () => {
    const r = await kpt(['fn', 'eval', pkg, '--exec', 'functions/set-namespace', '--results-dir', resultsDir])
    expect(r.code).to.equal(1)
    expect(r.stderr).to.contain('[FAIL] "functions/set-namespace"')
    expect(r.stderr).to.contain('[error] v1/ConfigMap/function-input: `data.namespace` should not be empty')
    for (const f of Object.keys(original)) expect(await read(f), f).to.equal(original[f])
    const results = parse(await readFile(path.join(resultsDir, 'results.yaml'), 'utf8')) as Obj
    expect(results.exitCode).to.equal(1)
    expect(results.items[0].exitCode).to.equal(1)
    expect(results.items[0].results).to.deep.equal([
      {
        message: '`data.namespace` should not be empty',
        severity: 'error',
        resourceRef: {apiVersion: 'v1', kind: 'ConfigMap', name: 'function-input'},
      },
    ])
  })

  it('runs as exec steps of a kpt fn render pipeline', async () => {
    const kptfile = original.Kptfile + [
      'pipeline:',
      '  mutators:',
      `  - exec: ${path.join(FUNCTIONS_DIR, 'set-namespace')}`,
      '    configMap:',
      '      namespace: staging',
      `  - exec: ${path.join(FUNCTIONS_DIR, 'set-annotations')}`,
      '    configMap:',
      '      owner: team-a',
      '',
    ].join('\n')
    await writeFile(path.join(pkg, 'Kptfile'), kptfile)
    const r = await kpt(['fn', 'render', pkg, '--allow-exec', '--results-dir', resultsDir])
    expect(r.code, r.stderr).to.equal(0)
    const deploy = await read('deploy.yaml')
    const [d, s] = docs(deploy)
    expect(d.metadata.namespace).to.equal('staging')
    expect(d.metadata.annotations).to.deep.equal({owner: 'team-a'})
    expect(d.spec.template.metadata.annotations).to.deep.equal({owner: 'team-a'})
    expect(s.metadata).to.deep.include({namespace: 'staging', annotations: {owner: 'team-a'}})
    expectCommentsKept(original['deploy.yaml'], deploy)
    expect(docs(await read('config/settings.yaml'))[0].metadata.namespace).to.equal('staging')
    expect(await read('Kptfile')).to.equal(kptfile)
    const results = parse(await readFile(path.join(resultsDir, 'results.yaml'), 'utf8')) as Obj
    expect(results.items.map((i: Obj) => i.exitCode)).to.deep.equal([0, 0])
  })

  it('apply-setters and remove-local-config-resources through kpt', async () => {
    const r = await kpt(['fn', 'eval', pkg, '--exec', 'functions/apply-setters', '--results-dir', resultsDir, '--', 'image=nginx:1.28'])
    expect(r.code, r.stderr).to.equal(0)
    expect(r.stderr).to.contain('[info] apps/v1/Deployment/hello spec.template.spec.containers[0].image: set field value to "nginx:1.28"')
    expect(await read('deploy.yaml')).to.equal(original['deploy.yaml'].replace('image: nginx:1.27', 'image: nginx:1.28'))

    const out = await kpt(['fn', 'eval', pkg, '--exec', 'functions/remove-local-config-resources', '-o', 'unwrap'])
    expect(out.code, out.stderr).to.equal(0)
    expect(docs(out.stdout).map((d) => d.kind)).to.deep.equal(['ConfigMap', 'Deployment', 'Service'])
  })
})
