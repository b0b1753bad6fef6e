/**
 * rewriteSdk (scripts/catalog-peers.mjs): how a catalog function's copied source is pointed at the
 * SDK's new home before it is built (set-labels: the proxy refuses the old path's pseudo-versions).
 */
import {expect} from 'chai'
import {mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'

import {CATALOG, rewriteSdk} from '../../scripts/catalog-peers.mjs'

const OLD = 'github.com/GoogleContainerTools/kpt-functions-sdk'

describe('catalog functions from source: the SDK import-path rewrite', () => {
  let dir: string
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'fnr-sdk-rewrite-'))
  })
  afterEach(() => rmSync(dir, {recursive: true, force: true}))

  it('rewrites go/fn imports in every .go file and requires the new SDK at v1.0.2, dropping the other old-path requirements', () => {
    writeFileSync(
      path.join(dir, 'go.mod'),
      `module example.com/fn\n\ngo 1.24.3\n\nrequire ${OLD}/go/fn v0.0.0-20250605065354-afe329cf801e\n\nrequire (\n\t${OLD}/go/api v0.0.0-20221014182208-8e78fe927b37 // indirect\n\tsigs.k8s.io/kustomize/kyaml v0.13.9 // indirect\n)\n`,
    )
    mkdirSync(path.join(dir, 'pkg'))
    writeFileSync(path.join(dir, 'main.go'), `package main\n\nimport (\n\t"${OLD}/go/fn"\n)\n`)
    writeFileSync(path.join(dir, 'pkg', 'x.go'), `package pkg\n\nimport fn "${OLD}/go/fn"\nimport "${OLD}/go/fn/internal"\n`)
    writeFileSync(path.join(dir, 'README.md'), `${OLD}/go/fn stays in prose\n`)
    rewriteSdk(dir)
    expect(readFileSync(path.join(dir, 'go.mod'), 'utf8')).to.equal(
      'module example.com/fn\n\ngo 1.24.3\n\nrequire github.com/kptdev/krm-functions-sdk/go/fn v1.0.2\n\nrequire (\n\tsigs.k8s.io/kustomize/kyaml v0.13.9 // indirect\n)\n',
    )
    expect(readFileSync(path.join(dir, 'main.go'), 'utf8')).to.equal('package main\n\nimport (\n\t"github.com/kptdev/krm-functions-sdk/go/fn"\n)\n')
    expect(readFileSync(path.join(dir, 'pkg', 'x.go'), 'utf8')).to.equal('package pkg\n\nimport fn "github.com/kptdev/krm-functions-sdk/go/fn"\nimport "github.com/kptdev/krm-functions-sdk/go/fn/internal"\n')
    expect(readFileSync(path.join(dir, 'README.md'), 'utf8')).to.contain(OLD)
  })

  it('rewrites a requirement inside a require block', () => {
    writeFileSync(path.join(dir, 'go.mod'), `module m\n\nrequire (\n\t${OLD}/go/fn v0.0.0-20220812180116-970f3e4cbc5a\n\tk8s.io/api v0.32.0\n)\n`)
    rewriteSdk(dir)
    expect(readFileSync(path.join(dir, 'go.mod'), 'utf8')).to.equal('module m\n\nrequire (\n\tgithub.com/kptdev/krm-functions-sdk/go/fn v1.0.2\n\tk8s.io/api v0.32.0\n)\n')
  })

  it('refuses a module that does not require the old SDK (nothing to rewrite: the catalog entry is wrong)', () => {
    writeFileSync(path.join(dir, 'go.mod'), 'module m\n\nrequire sigs.k8s.io/kustomize/kyaml v0.19.0\n')
    expect(() => rewriteSdk(dir)).to.throw(/no requirement on .*go\/fn to rewrite/)
  })

  it('the ten functions Porch ships: three from the module proxy, seven from the catalog\'s source, set-labels alone rewritten', () => {
    expect(CATALOG).to.have.length(10)
    expect(CATALOG.filter((f) => f.source === 'module-proxy').map((f) => f.name)).to.deep.equal(['apply-setters', 'set-namespace', 'starlark'])
    expect(CATALOG.filter((f) => f.source === 'catalog-source').map((f) => f.name)).to.have.length(7)
    expect(CATALOG.filter((f) => f.sdkRewrite).map((f) => f.name)).to.deep.equal(['set-labels'])
  })
})
