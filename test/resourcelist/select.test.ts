/**
 * src/lib/resourcelist/select.ts: kpt's resource selection for one function (`--match-*`,
 * `--exclude-*`, a Kptfile function's selectors and exclude). A resource is sent when it matches
 * any selector (or there are none) and no exclusion; every resource is numbered with
 * internal.config.k8s.io/kpt-resource-id so the output merges back in place.
 */
import {expect} from 'chai'
import {parseDocument, type YAMLMap} from 'yaml'

import {A} from '../../src/lib/resourcelist/constants.js'
import {getAnnotation, metaOf, setAnnotation} from '../../src/lib/resourcelist/meta.js'
import {isEmptySelector, matchesSelector, selectResources} from '../../src/lib/resourcelist/select.js'
import {PARSE_OPTIONS} from '../../src/lib/resourcelist/yaml.js'

const map = (text: string): YAMLMap => parseDocument(text, PARSE_OPTIONS).contents as YAMLMap

const DEPLOY = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: prod
  labels: {app: web, tier: "3"}
  annotations: {owner: team-a}
`

function items(): YAMLMap[] {
  return [
    map(DEPLOY),
    map('apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg, namespace: prod, labels: {app: web}}\n'),
    map('apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: dev}\n'),
  ]
}

const names = (list: YAMLMap[]) => list.map((i) => `${metaOf(i).kind}/${metaOf(i).name}`)

describe('resourcelist/select: selectors', () => {
  it('is empty with no field set, or only empty strings and maps', () => {
    expect(isEmptySelector({})).to.equal(true)
    expect(isEmptySelector({apiVersion: '', kind: '', name: '', namespace: '', labels: {}, annotations: {}})).to.equal(true)
    expect(isEmptySelector({kind: 'X'})).to.equal(false)
    expect(isEmptySelector({labels: {a: 'b'}})).to.equal(false)
    expect(isEmptySelector({annotations: {a: 'b'}})).to.equal(false)
  })

  it('matches on every field given, all of them at once', () => {
    const d = map(DEPLOY)
    expect(matchesSelector(d, {})).to.equal(true)
    expect(matchesSelector(d, {apiVersion: 'apps/v1', kind: 'Deployment', name: 'web', namespace: 'prod'})).to.equal(true)
    expect(matchesSelector(d, {kind: 'Deployment', name: 'other'})).to.equal(false)
    expect(matchesSelector(d, {apiVersion: 'v1'})).to.equal(false)
    expect(matchesSelector(d, {namespace: 'dev'})).to.equal(false)
  })

  it('matches exact kinds, not case-insensitive or partial ones', () => {
    const d = map(DEPLOY)
    expect(matchesSelector(d, {kind: 'deployment'})).to.equal(false)
    expect(matchesSelector(d, {name: 'we'})).to.equal(false)
  })

  it('needs every label and annotation given, compared as text', () => {
    const d = map(DEPLOY)
    expect(matchesSelector(d, {labels: {app: 'web'}})).to.equal(true)
    expect(matchesSelector(d, {labels: {app: 'web', tier: '3'}})).to.equal(true)
    expect(matchesSelector(d, {labels: {app: 'web', tier: '4'}})).to.equal(false)
    expect(matchesSelector(d, {labels: {missing: ''}})).to.equal(false)
    expect(matchesSelector(d, {annotations: {owner: 'team-a'}})).to.equal(true)
    expect(matchesSelector(d, {annotations: {app: 'web'}})).to.equal(false)
    // an unquoted number matches its text
    expect(matchesSelector(map('metadata: {labels: {v: 3}}\n'), {labels: {v: '3'}})).to.equal(true)
  })

  it('does not match labels on a resource whose labels are not a map', () => {
    expect(matchesSelector(map('metadata: {labels: [app]}\n'), {labels: {app: ''}})).to.equal(false)
  })
})

describe('resourcelist/select: selectResources', () => {
  it('sends everything untagged, and merges nothing, without selectors or exclusions', () => {
    const all = items()
    const s = selectResources(all, [{}], [{kind: ''}])
    expect(s.filtered).to.equal(false)
    expect(s.selected).to.equal(all)
    expect(all.every((i) => getAnnotation(i, A.kptResourceId) === undefined)).to.equal(true)
    const out = [map('kind: New\n')]
    expect(s.merge(out)).to.equal(out)
  })

  it('tags every resource with its index in the whole list, and sends those any selector matches', () => {
    const all = items()
    const s = selectResources(all, [{kind: 'Service'}, {labels: {tier: '3'}}], [])
    expect(s.filtered).to.equal(true)
    expect(names(s.selected)).to.deep.equal(['Deployment/web', 'Service/web'])
    expect(all.map((i) => getAnnotation(i, A.kptResourceId))).to.deep.equal(['0', '1', '2'])
  })

  it('leaves out what any exclusion matches, also with no selector', () => {
    expect(names(selectResources(items(), [], [{namespace: 'prod'}]).selected)).to.deep.equal(['Service/web'])
    expect(names(selectResources(items(), [{name: 'web'}], [{kind: 'Service'}]).selected)).to.deep.equal(['Deployment/web'])
    expect(selectResources(items(), [{name: 'web'}], [{name: 'web'}]).selected).to.deep.equal([])
  })

  it('merges the output back in place, drops sent resources the output lacks, and appends new ones', () => {
    const all = items()
    const s = selectResources(all, [{namespace: 'prod'}], [])
    // the function changes the ConfigMap, drops the Deployment and adds a Secret
    const changed = map(`apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg2\n  annotations:\n    ${A.kptResourceId}: '1'\n`)
    const added = map('apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n')
    const merged = s.merge([added, changed])
    expect(names(merged)).to.deep.equal(['ConfigMap/cfg2', 'Service/web', 'Secret/s'])
    expect(merged[1]).to.equal(all[2])
    // no ids are left anywhere, in the whole list or the output
    for (const i of [...merged, ...all]) expect(getAnnotation(i, A.kptResourceId)).to.equal(undefined)
  })

  it('keeps the order of the whole list whatever order the function writes', () => {
    const all = items()
    const s = selectResources(all, [{name: 'web'}], [])
    const merged = s.merge([...s.selected].reverse())
    expect(names(merged)).to.deep.equal(['Deployment/web', 'ConfigMap/cfg', 'Service/web'])
  })

  it('merges the very nodes it sent when the function gives them back unchanged', () => {
    const all = items()
    const s = selectResources(all, [{kind: 'ConfigMap'}], [])
    const merged = s.merge(s.selected)
    expect(merged).to.deep.equal(all)
    expect(merged[1]).to.equal(all[1])
    expect(getAnnotation(all[1]!, A.kptResourceId)).to.equal(undefined)
  })

  it('appends an output item whose id is empty as a new resource (kpt tests for ""), never drops it', () => {
    const all = items()
    const s = selectResources(all, [{kind: 'Deployment'}], [])
    const sent = map(`apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  annotations:\n    ${A.kptResourceId}: '0'\n`)
    const fresh = map(`apiVersion: v1\nkind: Secret\nmetadata:\n  name: new\n  annotations:\n    ${A.kptResourceId}: ''\n`)
    const merged = s.merge([sent, fresh])
    expect(names(merged)).to.deep.equal(['Deployment/web', 'ConfigMap/cfg', 'Service/web', 'Secret/new'])
    expect(getAnnotation(merged[3]!, A.kptResourceId)).to.equal(undefined)
  })

  it('treats an output with an id no sent resource had as a drop of the sent one, not a new resource', () => {
    const all = items()
    const s = selectResources(all, [{kind: 'Service'}], [])
    const stranger = map('kind: Other\nmetadata: {name: o}\n')
    setAnnotation(stranger, A.kptResourceId, '99')
    expect(names(s.merge([stranger]))).to.deep.equal(['Deployment/web', 'ConfigMap/cfg'])
  })
})
