import {existsSync, readFileSync, readdirSync} from 'node:fs'
import path from 'node:path'

import {expect} from 'chai'

import {REPO_ROOT} from './support/serve.js'
import {CONTROL_PLANE_SPECS, OPT_IN_SUITES, PEER_SPECS, PEER_SUITES, UNIT, mochaSelection} from './suites.mjs'

/** Every spec file under test/ (relative to the repository root). */
function allSpecs(dir = 'test'): string[] {
  return readdirSync(path.join(REPO_ROOT, dir), {withFileTypes: true}).flatMap((e) =>
    e.isDirectory() ? allSpecs(`${dir}/${e.name}`) : e.name.endsWith('.test.ts') ? [`${dir}/${e.name}`] : [],
  )
}

/** The spec files a `--spec` argument selects (a folder glob `test/<folder>/**\/*.test.ts`, `test/*.test.ts` or a file). */
function selected(arg: string, specs: string[]): string[] {
  if (arg === 'test/*.test.ts') return specs.filter((f) => f.split('/').length === 2)
  const folder = /^(test\/[^*]+)\/\*\*\/\*\.test\.ts$/.exec(arg)
  if (folder) return specs.filter((f) => f.startsWith(`${folder[1]}/`))
  return specs.includes(arg) ? [arg] : []
}

describe('test sets (test/suites.mjs)', () => {
  it('every unit spec listed exists (a renamed spec must not drop out of the unit set unseen)', () => {
    const missing = UNIT.filter((f) => !existsSync(path.join(REPO_ROOT, f)))
    expect(missing).to.deep.equal([])
  })

  it('the unit set loads the process guard; the integration set is every spec but the unit ones', () => {
    const unit = mochaSelection('unit')
    expect(unit).to.include('test/support/unit-guard.mjs')
    const all = mochaSelection('all')
    const integration = mochaSelection('integration')
    expect(integration.slice(0, all.length)).to.deep.equal(all)
    expect(integration.slice(all.length).filter((a) => a !== '--ignore')).to.deep.equal(UNIT)
  })

  it('all: every spec file once, the suites that need Go peers last (they build in the background meanwhile)', () => {
    const globs = mochaSelection('all').filter((a) => a !== '--spec')
    expect(globs[0]).to.equal('test/*.test.ts')
    expect(new Set(globs).size).to.equal(globs.length)
    for (const folder of ['commands', 'resourcelist', 'schema']) expect(globs).to.include(`test/${folder}/**/*.test.ts`)
    const specs = allSpecs()
    const order = globs.flatMap((g) => selected(g, specs))
    const optIn = specs.filter((f) => OPT_IN_SUITES.some((o) => f.startsWith(`test/${o}/`)))
    expect([...order].sort()).to.deep.equal(specs.filter((f) => !optIn.includes(f)).sort())
    // the peer specs of other folders, then the peer folders in PEER_SUITES' order, with the control-plane specs just before the cluster folder
    const peer = (f: string): boolean => PEER_SUITES.some((p) => f.startsWith(`test/${p}/`))
    const late = (f: string): boolean => peer(f) || CONTROL_PLANE_SPECS.includes(f) || PEER_SPECS.includes(f)
    const tail = order.slice(order.findIndex(late))
    expect(tail.every(late), 'nothing else after the first peer suite').to.equal(true)
    expect(tail.slice(0, PEER_SPECS.length)).to.deep.equal(PEER_SPECS)
    const cluster = tail.findIndex((f) => f.startsWith('test/cluster/'))
    expect(tail.slice(cluster - CONTROL_PLANE_SPECS.length, cluster)).to.deep.equal(CONTROL_PLANE_SPECS)
    expect(tail.slice(cluster).every((f) => f.startsWith('test/cluster/'))).to.equal(true)
  })

  it('the control-plane specs outside the peer folders are exactly those that start the shared control plane', () => {
    // directly, or through the pod bed on the control plane (support/pods/cluster-bed.ts, support/reliability/pod-serve.ts)
    const importsIt = /import \{[^}]*\bsharedControlPlane\b[^}]*\} from '[./]*support\/cluster\/shared\.js'|from '[./]*support\/(pods\/cluster-bed|reliability\/pod-serve)\.js'/
    // the reliability folder stays whole (its tally judges the whole set in one process)
    const uses = allSpecs().filter((f) => !PEER_SUITES.some((p) => f.startsWith(`test/${p}/`)) && !f.startsWith('test/reliability/') && importsIt.test(readFileSync(path.join(REPO_ROOT, f), 'utf8')))
    expect([...CONTROL_PLANE_SPECS].sort()).to.deep.equal(uses.sort())
  })

  it('the peer specs outside the peer folders are exactly those that build a Go peer (scripts/catalog-peers.mjs)', () => {
    const importsIt = /from '[./]*scripts\/catalog-peers\.mjs'/
    const outside = (f: string): boolean => ![...PEER_SUITES, ...OPT_IN_SUITES].some((p) => f.startsWith(`test/${p}/`))
    const uses = allSpecs().filter((f) => outside(f) && importsIt.test(readFileSync(path.join(REPO_ROOT, f), 'utf8')))
    expect([...PEER_SPECS].sort()).to.deep.equal(uses.sort())
  })

  it('the opt-in suites (npm run porch-e2e) are in no set: their specs exist but npm test never selects them', () => {
    expect(OPT_IN_SUITES).to.deep.equal(['porch-e2e'])
    expect(existsSync(path.join(REPO_ROOT, 'test', 'porch-e2e', 'porch-server.test.ts'))).to.equal(true)
    for (const set of ['all', 'unit', 'integration'] as const) expect(mochaSelection(set).filter((a) => a.includes('porch-e2e')), set).to.deep.equal([])
  })
})
