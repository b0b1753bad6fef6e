/**
 * Reading a process group from /proc for the call budget's idle judgement (src/lib/idle-calls.ts
 * readGroups), on this test's own process (no process is started): CPU time, resident memory,
 * start time and age by the kernel's clock, a running process is runnable, and a pid that is gone
 * is left out. The judgement on such readings is in test/grpc/admission.test.ts; a group whose
 * leader exited, in test/process/idle-ending.test.ts.
 */
import {readdirSync, readFileSync} from 'node:fs'

import {expect} from 'chai'

import {readGroups} from '../../src/lib/idle-calls.js'

/** The fields of /proc/<pid>/stat after the command's closing parenthesis (state is [0], pgrp [2]). */
function statFields(pid: number | 'self'): string[] {
  const stat = readFileSync(`/proc/${pid}/stat`, 'latin1')
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')
}

/** Whether this process has a live child (on any of its threads). */
function hasLiveChildren(): boolean {
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      if (readFileSync(`/proc/self/task/${tid}/children`, 'latin1').trim() !== '') return true
    } catch {
      // a thread that ended meanwhile
    }
  }
  return false
}

describe('call budget: reading process groups from /proc', () => {
  it('reads this process: its CPU time, memory, start and age as the kernel counts them, runnable while it runs', () => {
    // some CPU time to read
    let x = 0
    for (let i = 0; i < 2e6; i++) x += i % 7
    expect(x).to.be.greaterThan(0)
    const at = Date.now()
    const r = readGroups([process.pid], at).get(process.pid)
    expect(r, 'a reading of this process').to.not.equal(undefined)
    const cpu = process.cpuUsage()
    const cpuMs = (cpu.user + cpu.system) / 1000
    expect(r!.at).to.equal(at)
    expect(r!.cpuMs).to.be.greaterThan(0)
    // The reading is the whole group's: its live descendants and its reaped children (cutime, cstime: a call's forked
    // helpers), which Node's own count leaves out. Other specs of the same mocha process may have left either.
    const fields = statFields('self')
    const childrenMs = ((Number(fields[13]) + Number(fields[14])) * 1000) / 100
    const why = `cpu ${r!.cpuMs} ms read (${childrenMs} ms of it reaped children), ${cpuMs} ms by Node`
    expect(r!.cpuMs, why).to.be.at.least(cpuMs - 500)
    if (!hasLiveChildren()) expect(Math.abs(r!.cpuMs - childrenMs - cpuMs), why).to.be.below(500)
    const rss = process.memoryUsage.rss()
    expect(r!.rssBytes).to.be.within(rss / 2, rss * 2)
    const uptimeMs = process.uptime() * 1000
    expect(Math.abs(r!.ageMs - uptimeMs), `age ${r!.ageMs} ms, uptime ${uptimeMs} ms`).to.be.below(2000)
    expect(Math.abs(r!.startedAt - (at - uptimeMs)), 'start time').to.be.below(2000)
    expect(r!.ioBytes).to.be.a('number').and.at.least(0)
    expect(r!.runnable).to.equal(true)
  })

  it('leaves out a pid that does not exist, and reads the others', () => {
    const readings = readGroups([2 ** 30, process.pid])
    expect([...readings.keys()]).to.deep.equal([process.pid])
    expect(readGroups([])).to.deep.equal(new Map())
  })
})
