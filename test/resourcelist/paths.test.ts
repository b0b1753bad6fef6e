/**
 * Where items go in a package (src/lib/resourcelist/write.ts, constants.ts): default paths and
 * indexes as kpt gives them, Go's path.Clean, kpt's path invariants, the orchestrator annotations
 * that never reach a file, and which file names kpt reads as resources.
 */
import {expect} from 'chai'
import {parseDocument, type YAMLMap} from 'yaml'

import {FnrError} from '../../src/lib/errors.js'
import {isResourceFileName} from '../../src/lib/resourcelist/constants.js'
import {getAnnotation} from '../../src/lib/resourcelist/meta.js'
import {checkPathInvariants, cleanPath, defaultPaths, defaultPathsAndIndexes, stripOrchestratorAnnotations} from '../../src/lib/resourcelist/write.js'
import {PARSE_OPTIONS, stringifyNode} from '../../src/lib/resourcelist/yaml.js'

function item(kind: string, name: string, annotations: Record<string, string> = {}, namespace?: string): YAMLMap {
  const ann = Object.entries(annotations).map(([k, v]) => `\n    ${k}: '${v}'`).join('')
  const ns = namespace ? `\n  namespace: ${namespace}` : ''
  return parseDocument(`apiVersion: v1\nkind: ${kind}\nmetadata:\n  name: ${name}${ns}${ann ? `\n  annotations:${ann}` : ''}\n`, PARSE_OPTIONS).contents as YAMLMap
}

describe('resourcelist: paths in a package', () => {
  it('defaultPaths: kind_name.yaml under the namespace, set both ways; a path already given (either way) is kept', () => {
    const plain = item('ConfigMap', 'cfg')
    const namespaced = item('Service', 'web', {}, 'prod')
    const given = item('ConfigMap', 'x', {'internal.config.kubernetes.io/path': 'mine.yaml'})
    const legacy = item('ConfigMap', 'y', {'config.kubernetes.io/path': 'old.yaml'})
    defaultPaths([plain, namespaced, given, legacy])
    expect(getAnnotation(plain, 'internal.config.kubernetes.io/path')).to.equal('configmap_cfg.yaml')
    expect(getAnnotation(plain, 'config.kubernetes.io/path')).to.equal('configmap_cfg.yaml')
    expect(getAnnotation(namespaced, 'internal.config.kubernetes.io/path')).to.equal('prod/service_web.yaml')
    expect(getAnnotation(given, 'internal.config.kubernetes.io/path')).to.equal('mine.yaml')
    expect(getAnnotation(legacy, 'internal.config.kubernetes.io/path')).to.equal('old.yaml')
  })

  it('defaultPathsAndIndexes: items without an index get the next free one in their file', () => {
    const a0 = item('ConfigMap', 'a', {'internal.config.kubernetes.io/path': 'f.yaml', 'internal.config.kubernetes.io/index': '2'})
    const a1 = item('ConfigMap', 'b', {'internal.config.kubernetes.io/path': 'f.yaml'})
    const a2 = item('ConfigMap', 'c', {'internal.config.kubernetes.io/path': 'f.yaml'})
    const other = item('ConfigMap', 'd', {'internal.config.kubernetes.io/path': 'g.yaml'})
    defaultPathsAndIndexes([a0, a1, a2, other])
    expect([a0, a1, a2, other].map((i) => getAnnotation(i, 'internal.config.kubernetes.io/index'))).to.deep.equal(['2', '3', '4', '0'])
    expect(getAnnotation(a1, 'config.kubernetes.io/index')).to.equal('3')
  })

  it('cleanPath cleans like Go\'s path.Clean', () => {
    const cases: Array<[string, string]> = [
      ['./a/../b.yaml', 'b.yaml'],
      ['a//b/', 'a/b'],
      ['a/./b', 'a/b'],
      ['/', '/'],
      ['../x', '../x'],
      ['.', '.'],
    ]
    for (const [p, want] of cases) expect(cleanPath(p), p).to.equal(want)
  })

  it('path invariants: no absolute path, none outside the package, no directory, no path and index used twice', () => {
    const at = (p: string, i = '0', pkg?: string) => item('ConfigMap', `n${Math.random().toString(36).slice(2, 6)}`, {'internal.config.kubernetes.io/path': p, 'internal.config.kubernetes.io/index': i, ...(pkg ? {'internal.config.kubernetes.io/package-path': pkg} : {})})
    expect(() => checkPathInvariants([at('a.yaml'), at('a.yaml', '1'), at('sub/a.yaml')])).to.not.throw()
    expect(() => checkPathInvariants([at('/etc/x.yaml')])).to.throw(FnrError, 'function must not modify resources outside of package: resource has absolute path /etc/x.yaml')
    expect(() => checkPathInvariants([at('a/../../x.yaml')])).to.throw(FnrError, 'function must not modify resources outside of package: resource has path a/../../x.yaml')
    expect(() => checkPathInvariants([at('sub/')])).to.throw(FnrError, 'config.kubernetes.io/path cannot be a directory: sub/')
    expect(() => checkPathInvariants([at('a.yaml'), at('./a.yaml')])).to.throw(FnrError, 'resource at path "a.yaml" and index "0" already exists')
    // in render, the same path in two packages is two files
    expect(() => checkPathInvariants([at('a.yaml', '0', 'p1'), at('a.yaml', '0', 'p2')])).to.not.throw()
    expect(() => checkPathInvariants([at('/x.yaml')], 'InvalidArgument')).to.throw(FnrError).with.property('kind', 'InvalidArgument')
  })

  it('strips the orchestrator annotations (internal, legacy path/index/id, kpt\'s resource id) and an annotations map left empty', () => {
    const withOthers = item('ConfigMap', 'a', {'internal.config.kubernetes.io/path': 'a.yaml', 'config.kubernetes.io/path': 'a.yaml', 'config.kubernetes.io/index': '0', 'config.k8s.io/id': '1', 'internal.config.k8s.io/kpt-resource-id': '0', 'team.example.com/owner': 'me'})
    stripOrchestratorAnnotations(withOthers)
    expect(stringifyNode(withOthers)).to.equal("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  annotations:\n    team.example.com/owner: 'me'\n")
    const onlyOurs = item('ConfigMap', 'b', {'internal.config.kubernetes.io/index': '0'})
    stripOrchestratorAnnotations(onlyOurs)
    expect(stringifyNode(onlyOurs)).to.equal('apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n')
  })

  it('reads Kptfile, *.yaml, *.yml and *.json as resources, nothing else', () => {
    for (const yes of ['Kptfile', 'a.yaml', 'a.yml', 'a.json', '.hidden.yaml']) expect(isResourceFileName(yes), yes).to.equal(true)
    for (const no of ['kptfile', 'a.yaml.bak', 'README.md', 'a.YAML', 'Kptfile.txt']) expect(isResourceFileName(no), no).to.equal(false)
  })
})
