/**
 * The call budget's reading of a process group whose leader has exited and is not reaped yet
 * (src/lib/idle-calls.ts readGroups): the call is ending, never asleep. A flooded runner reads its
 * functions' ends late, and judging them asleep lent their slots while they still counted among
 * the container's processes (test/reliability/memory-limit.test.ts). Readings of a live process
 * are in test/lib/idle-readings.test.ts.
 */
import {spawn} from 'node:child_process'
import {once} from 'node:events'
import {readFileSync} from 'node:fs'

import {expect} from 'chai'

import {readGroups} from '../../src/lib/idle-calls.js'

/** The state letter of /proc/<pid>/stat. */
function state(pid: number): string {
  const stat = readFileSync(`/proc/${pid}/stat`, 'latin1')
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0]!
}

describe('call budget: a group whose leader has exited', () => {
  it('a group whose leader has exited and is not reaped yet is ending, never asleep; one asleep is not runnable', async () => {
    // perl forks a child that leads a group of its own and exits; perl does not reap it for 5 s.
    const parent = spawn('perl', ['-e', '$| = 1; my $p = fork(); if ($p == 0) { setpgrp(0, 0); exit 0 } print "$p\\n"; sleep 5'], {stdio: ['ignore', 'pipe', 'ignore']})
    try {
      const [line] = (await once(parent.stdout!, 'data')) as [Buffer]
      const child = Number(line.toString().trim())
      for (let i = 0; i < 100 && state(child) !== 'Z'; i++) await new Promise((r) => setTimeout(r, 10))
      expect(state(child)).to.equal('Z')
      expect(readGroups([child]).get(child)?.runnable, 'an exited leader').to.equal(true)
      expect(state(parent.pid!)).to.equal('S')
      expect(readGroups([parent.pid!]).get(parent.pid!)?.runnable, 'a sleeping process (its child a zombie, not the leader)').to.equal(false)
    } finally {
      parent.kill('SIGKILL')
      await once(parent, 'exit')
    }
  })

})
