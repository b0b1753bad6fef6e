/**
 * The wrapper server's evaluator before its entrypoint starts (src/lib/evaluators/entrypoint.ts):
 * no entrypoint is a Config error at construction, a call already cancelled or past its deadline is
 * answered without a process, and what counts as a ResourceList in the output (YAML or JSON, quoted
 * or not, the kind as a whole word). The calls that run the entrypoint are in test/wrapper/.
 */
import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import {EntrypointEvaluator, looksLikeResourceList} from '../../src/lib/evaluators/entrypoint.js'
import {ProcessLauncher} from '../../src/lib/process/launcher.js'
import {SAMPLE_RL} from '../support/tmp.js'

describe('wrapper evaluator: before the entrypoint starts', () => {
  const launcher = new ProcessLauncher()
  after(() => launcher.close())

  it('refuses to be made without an entrypoint', () => {
    for (const entrypoint of [[], [''], ['   ', 'x']]) {
      expect(() => new EntrypointEvaluator({entrypoint, maxOutputBytes: 1024, launcher}), JSON.stringify(entrypoint))
        .to.throw(FnrError, 'no function entrypoint: pass the function\'s command after "--" (e.g. wrapper-server -- /usr/local/bin/function)')
        .with.property('kind', 'Config')
    }
    expect(new EntrypointEvaluator({entrypoint: ['/usr/local/bin/function'], maxOutputBytes: 1024, launcher}).name).to.equal('wrapper')
  })

  it('a call already cancelled, or past its deadline, is answered without starting the entrypoint', async () => {
    const evaluator = new EntrypointEvaluator({entrypoint: ['/usr/local/bin/function'], maxOutputBytes: 1024, launcher})
    const aborted = new AbortController()
    aborted.abort()
    const cancelled = (await evaluator.evaluate({image: 'example.com/fn:v1', resourceList: SAMPLE_RL, signal: aborted.signal}).catch((e: unknown) => e)) as FnrError
    expect(cancelled.kind).to.equal('Cancelled')
    expect(cancelled.message).to.equal('function "example.com/fn:v1" was cancelled before it started')
    const late = (await evaluator.evaluate({image: 'example.com/fn:v1', resourceList: SAMPLE_RL, deadline: Date.now() - 1}).catch((e: unknown) => e)) as FnrError
    expect(late.kind).to.equal('DeadlineExceeded')
    expect(launcher.liveCalls.size).to.equal(0)
  })

  it('reads a ResourceList in YAML or JSON, quoted or not; not another kind, nor the word inside another', () => {
    const yes = ['kind: ResourceList\n', 'apiVersion: config.kubernetes.io/v1\nkind:   "ResourceList"\nitems: []\n', '{"apiVersion":"config.kubernetes.io/v1","kind":"ResourceList","items":[]}', "{'kind' : 'ResourceList'}", '  kind: ResourceList # indented\n']
    const no = ['kind: ResourceListX\n', 'kind: List\n', 'metadata:\n  name: kind: ResourceList\n', 'mykind: ResourceList\n', 'x: {a: 1}\n', '']
    for (const t of yes) expect(looksLikeResourceList(Buffer.from(t)), JSON.stringify(t)).to.equal(true)
    for (const t of no) expect(looksLikeResourceList(Buffer.from(t)), JSON.stringify(t)).to.equal(false)
  })
})
