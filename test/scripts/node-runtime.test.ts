/**
 * The Node versions the project pins (scripts/node-runtime.mjs) and the engines check that makes
 * `npm test` / `npm run demo` re-run themselves on Node 26 (scripts/setup.mjs).
 */
import {expect} from 'chai'

import {NODE_MAIN, NODE_OTHERS, pinnedVersion} from '../../scripts/node-runtime.mjs'
import {engineFloor, nodeIsSupported} from '../../scripts/setup.mjs'

describe('Node versions: the pins and the engines floor', () => {
  it('main is Node 26; a major line picks its pinned release; an unpinned line is refused', () => {
    expect(NODE_MAIN.split('.')[0]).to.equal('26')
    expect(pinnedVersion()).to.equal(NODE_MAIN)
    expect(pinnedVersion('main')).to.equal(NODE_MAIN)
    expect(pinnedVersion('26')).to.equal(NODE_MAIN)
    expect(pinnedVersion('22').split('.')[0]).to.equal('22')
    expect(pinnedVersion('v24').split('.')[0]).to.equal('24')
    expect(pinnedVersion('24.22.3')).to.equal('24.22.3')
    expect(() => pinnedVersion('20')).to.throw(/no pinned Node for "20"/)
  })

  it('the unit set runs on the engines floor itself: the lowest pinned version is package.json\'s minimum', () => {
    const {range, floor} = engineFloor()
    expect(range).to.equal('>=22.15')
    const lowest = [NODE_MAIN, ...NODE_OTHERS].map((v) => v.split('.').map(Number)).sort((a, b) => a[0]! - b[0]! || a[1]! - b[1]! || a[2]! - b[2]!)[0]
    expect(lowest).to.deep.equal(floor)
  })

  it('nodeIsSupported compares the version with the floor part by part', () => {
    for (const v of ['22.15.0', '22.15.1', '22.23.5', '23.0.0', '24.22.3', '26.12.1', '100.0.0']) expect(nodeIsSupported(v), v).to.equal(true)
    for (const v of ['20.20.2', '22.14.99', '22.9.0', '21.99.0', '18.0.0']) expect(nodeIsSupported(v), v).to.equal(false)
  })
})
