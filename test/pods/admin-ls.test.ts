/**
 * `fnr pods ls`'s table (src/lib/pods/admin/ls.ts, formatPodTable): one row per pod under a fixed
 * header, columns aligned, durations in the short form kubectl uses (45s, 3m5s, 2h1m). Listing the
 * pods needs the API server (test/operator/); a namespace that cannot be one is refused before.
 */
import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import type {FunctionPodInfo} from '../../src/lib/pods/admin/admin.js'
import {formatPodTable, listPods} from '../../src/lib/pods/admin/ls.js'

const NOW = Date.parse('2026-01-01T12:00:00Z')
const HEADER = ['IMAGE', 'POD', 'SERVICE', 'STATE', 'READY', 'AGE', 'LAST USED', 'TTL LEFT', 'TEMPLATE', 'OWNER', 'LEASE']

function info(over: Partial<FunctionPodInfo> = {}): FunctionPodInfo {
  return {
    pod: 'cat-v1-1-abc',
    service: 'cat-v1-1-abc',
    image: 'example.com/fn/cat:v1',
    phase: 'Running',
    ready: true,
    state: 'ready',
    detail: 'ready',
    created: '2026-01-01T11:00:00Z',
    ageSeconds: 3600,
    lastUsed: '2026-01-01T11:59:30Z',
    ttlSeconds: 1800,
    ttlLeftSeconds: 1770,
    templateVersion: 'inline-0a1b2c3d',
    owner: 'fnr-7d9f',
    ownerLease: 'live',
    podIP: '10.0.0.7',
    ...over,
  }
}

/** The cells of each line (columns are separated by two or more spaces; no cell here holds two). */
function cells(table: string): string[][] {
  return table.trimEnd().split('\n').map((l) => l.split(/ {2,}/))
}

describe('`fnr pods ls` table', () => {
  it('is the header alone when there are no pods, ending in a newline', () => {
    expect(formatPodTable([], NOW)).to.equal(`${HEADER.join('  ')}\n`)
  })

  it('says each field of a ready pod', () => {
    expect(cells(formatPodTable([info()], NOW))).to.deep.equal([HEADER, ['example.com/fn/cat:v1', 'cat-v1-1-abc', 'cat-v1-1-abc', 'ready', 'yes', '1h', '30s ago', '29m30s', 'inline-0a1b2c3d', 'fnr-7d9f', 'live']])
  })

  it('aligns every column but the last on its widest cell, two spaces apart, with no trailing blanks', () => {
    const table = formatPodTable([info(), info({pod: 'a-much-longer-pod-name-v1-2-xyz', ownerLease: 'released'})], NOW)
    const lines = table.split('\n')
    expect(lines.at(-1)).to.equal('')
    const podColumn = lines[0]!.indexOf('POD')
    const serviceColumn = lines[0]!.indexOf('SERVICE')
    expect(serviceColumn - podColumn).to.equal('a-much-longer-pod-name-v1-2-xyz'.length + 2)
    for (const line of lines.slice(1, -1)) expect(line.indexOf('cat-v1-1-abc', podColumn + 1)).to.equal(serviceColumn)
    for (const line of lines) expect(line).to.equal(line.trimEnd())
  })

  it('prints durations as 0s, 59s, 1m, 1m1s, 1h, 1h1m (seconds dropped past an hour)', () => {
    const ages = [0, 59, 60, 61, 3600, 3660, 3661, 90_000].map((ageSeconds) => cells(formatPodTable([info({ageSeconds})], NOW))[1]![5])
    expect(ages).to.deep.equal(['0s', '59s', '1m', '1m1s', '1h', '1h1m', '1h1m', '25h'])
  })

  it('shows the detail of a starting or failed pod, not of a ready or deleting one', () => {
    const rows = cells(formatPodTable([
      info({state: 'starting', detail: 'pulling image', ready: false}),
      info({state: 'failed', detail: 'container exited with code 1', ready: false}),
      info({state: 'deleting', detail: 'terminating'}),
    ], NOW))
    expect(rows.slice(1).map((r) => [r[3], r[4]])).to.deep.equal([
      ['starting (pulling image)', 'no'],
      ['failed (container exited with code 1)', 'no'],
      ['deleting', 'yes'],
    ])
  })

  it('an expired TTL reads "expired", a TTL ending now "0s"', () => {
    const ttl = (ttlLeftSeconds: number): string => cells(formatPodTable([info({ttlLeftSeconds})], NOW))[1]![7]!
    expect(ttl(-1)).to.equal('expired')
    expect(ttl(0)).to.equal('0s')
  })

  it('writes "-" for what is unknown, and "?" when the Leases could not be read', () => {
    const row = cells(formatPodTable([info({image: null, service: null, ageSeconds: null, lastUsed: null, ttlLeftSeconds: null, templateVersion: null, owner: null, ownerLease: null})], NOW))[1]
    expect(row).to.deep.equal(['-', 'cat-v1-1-abc', '-', 'ready', 'yes', '-', '-', '-', '-', '-', '?'])
    expect(cells(formatPodTable([info({ownerLease: 'none'})], NOW))[1]![10]).to.equal('none')
  })

  it('counts the last use back from now, in whole seconds', () => {
    const lastUsed = (iso: string): string => cells(formatPodTable([info({lastUsed: iso})], NOW))[1]![6]!
    expect(lastUsed('2026-01-01T11:59:59.500Z')).to.equal('0s ago')
    expect(lastUsed('2026-01-01T09:58:00Z')).to.equal('2h2m ago')
  })

  it('listing refuses a namespace that cannot be one before any cluster call (a Usage error)', async () => {
    const err = await listPods({namespace: 'Not_A_Namespace'}).then(() => undefined, (e: unknown) => e)
    expect(err).to.be.instanceOf(FnrError)
    expect((err as FnrError).kind).to.equal('Usage')
    expect((err as FnrError).message).to.equal('--namespace "Not_A_Namespace" is not a valid namespace name')
  })
})
