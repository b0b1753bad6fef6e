/** Which processes a sweep reads (src/lib/process/sweep.ts), on given pids and environments; the sweeps of real processes are in ./sweep.test.ts. */
import {expect} from 'chai'

import {CALL_MARKER_ENV, lowestPid, markedAmong, type SweepTarget} from '../../src/lib/process/sweep.js'

describe('process sweep: which processes it reads (given pids and environments)', () => {
  it('reads only pids from the oldest target function on, unless the pid counter wrapped or a pid is unknown', () => {
    const targets = [{marker: 'a', pid: 500}, {marker: 'b', pid: 300}, {marker: 'c', pid: 900}]
    expect(lowestPid(targets, 1000)).to.equal(300)
    expect(lowestPid(targets, 900)).to.equal(300)
    // the last pid handed out is below a target's: the counter wrapped, every process is read
    expect(lowestPid(targets, 899)).to.equal(0)
    expect(lowestPid(targets, 100)).to.equal(0)
    expect(lowestPid([...targets, {marker: 'd'}], 1000)).to.equal(0)
    expect(lowestPid(targets, undefined)).to.equal(0)
    expect(lowestPid([], 1000)).to.equal(0)
  })

  it('reads an empty environment (a process caught mid-execve) once more, and finds the marker it then shows', async () => {
    const target: SweepTarget = {marker: 'm.1', pid: 100}
    const reads = new Map<number, number>()
    const environs: Record<number, Buffer[]> = {
      // mid-exec: empty on the first read, the new program's environment on the second
      101: [Buffer.alloc(0), Buffer.from(`PATH=/bin\0${CALL_MARKER_ENV}=m.1\0`)],
      // really empty: read twice, not marked
      102: [Buffer.alloc(0), Buffer.alloc(0)],
      // marked at once: read once
      103: [Buffer.from(`${CALL_MARKER_ENV}=m.1\0HOME=/`)],
      // another runner's call: read once, not marked
      104: [Buffer.from(`${CALL_MARKER_ENV}=other.1\0`)],
    }
    const read = async (pid: number): Promise<Buffer | undefined> => {
      const n = reads.get(pid) ?? 0
      reads.set(pid, n + 1)
      return environs[pid]?.[n]
    }
    const marked = await markedAmong([101, 102, 103, 104, 105], new Map([['m.1', target]]), read)
    expect([...marked.keys()].sort()).to.deep.equal([101, 103])
    expect(Object.fromEntries(reads)).to.deep.equal({101: 2, 102: 2, 103: 1, 104: 1, 105: 1})
  })
})
