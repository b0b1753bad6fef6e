// Decisions read typed error fields, never message text: the lint rule that enforces it (eslint.config.js's
// MESSAGE_MATCHING) catches each form of message matching, and the errors whose text code used to match
// now carry the field the decision reads.
import {mkdtemp, rm, writeFile, chmod} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'

import type {V1Pod} from '@kubernetes/client-node'
import {expect} from 'chai'
import {Linter} from 'eslint'
import tseslint from 'typescript-eslint'

import {MESSAGE_MATCHING} from '../../scripts/lint-rules.mjs'
import {resolveBinary} from '../../src/lib/config/exec-config.js'
import {parseFunctionConfig} from '../../src/lib/config/function-config-crd.js'
import {FnrError} from '../../src/lib/errors.js'
import {podReadiness} from '../../src/lib/pods/cluster/manager.js'

function lint(code: string): string[] {
  const linter = new Linter({configType: 'flat'})
  const messages = linter.verify(code, [{
    files: ['**/*.ts'],
    languageOptions: {parser: tseslint.parser as Linter.Parser},
    rules: {'no-restricted-syntax': ['error', ...MESSAGE_MATCHING]},
  }], 'x.ts')
  return messages.map((m) => m.message)
}

describe('decisions from types, not from messages', () => {
  it('the lint rule flags every form of branching on an error message', () => {
    const flagged = [
      'declare const err: Error; if (err.message.startsWith("x")) {}',
      'declare const err: Error; if (err.message.includes("x")) {}',
      'declare const err: Error; if (/x/.test(err.message)) {}',
      'declare const err: unknown; if (/x/.test((err as Error).message)) {}',
      'declare const err: Error; if (err.message === "x") {}',
      'declare const err: Error; const m = /x/.exec(err.message)',
    ]
    for (const code of flagged) expect(lint(code), code).to.have.length(1)
    const allowed = [
      'declare const err: Error; console.log(`failed: ${err.message}`)',
      'declare const err: {code?: string}; if (err.code === "ENOENT") {}',
      'declare const body: {message?: unknown}; if (typeof body.message === "string") {}',
    ]
    for (const code of allowed) expect(lint(code), code).to.deep.equal([])
  })

  it('a container that terminated is marked containerExited (its log tail is worth reading); an unpullable one is not', () => {
    const pod = (containerStatus: object): V1Pod => ({metadata: {name: 'p'}, status: {phase: 'Pending', containerStatuses: [{name: 'function', ...containerStatus}]}}) as V1Pod
    const exited = podReadiness(pod({state: {terminated: {exitCode: 2}}}), 'img')
    expect(exited.state).to.equal('failed')
    expect(exited.state === 'failed' && exited.error.details.containerExited).to.equal(true)
    const looping = podReadiness(pod({lastState: {terminated: {exitCode: 1}}, restartCount: 3, state: {waiting: {reason: 'CrashLoopBackOff'}}}), 'img')
    expect(looping.state === 'failed' && looping.error.details.containerExited).to.equal(true)
    const unpullable = podReadiness(pod({state: {waiting: {reason: 'ImagePullBackOff', message: 'crash terminated exit code'}}}), 'img')
    expect(unpullable.state).to.equal('failed')
    // The message happens to contain the words the old pattern matched; the decision does not read it.
    expect(unpullable.state === 'failed' && unpullable.error.details.containerExited).to.equal(false)
  })

  describe('function binaries', () => {
    let dir: string
    before(async () => {
      dir = await mkdtemp(path.join(os.tmpdir(), 'fnr-typed-'))
      await writeFile(path.join(dir, 'not-exec'), '#!/bin/sh\n')
      await chmod(path.join(dir, 'not-exec'), 0o644)
    })
    after(() => rm(dir, {recursive: true, force: true}))

    it('a binary that is missing or not executable is marked missingBinary; one outside the directory is not', async () => {
      const kind = async (name: string): Promise<boolean | undefined> => {
        try {
          await resolveBinary(dir, name, 'where')
        } catch (err) {
          return (err as FnrError).details.missingBinary
        }
        throw new Error(`${name} resolved`)
      }
      expect(await kind('absent')).to.equal(true)
      expect(await kind('not-exec')).to.equal(true)
      expect(await kind('../etc/passwd')).to.equal(undefined)
    })

    it('a FunctionConfig whose binary is missing keeps its other settings; one whose path leaves the directory is rejected naming the object once', async () => {
      const obj = (p: string): Parameters<typeof parseFunctionConfig>[0] => ({
        metadata: {name: 'fc', namespace: 'ns'},
        spec: {image: 'set-labels', binaryExecutor: {tags: ['v1'], path: p}, podExecutor: {tags: ['v2']}},
      }) as Parameters<typeof parseFunctionConfig>[0]
      const missing = await parseFunctionConfig(obj('absent'), {functionsDir: dir})
      expect(missing.binary).to.equal(undefined)
      expect(missing.pod?.tags).to.deep.equal(['v2'])
      expect(missing.problems?.join('\n')).to.match(/does not exist; its tags \["v1"\] go to the pod runtime/)
      let rejected: unknown
      try {
        await parseFunctionConfig(obj('/etc/passwd'), {functionsDir: dir})
      } catch (err) {
        rejected = err
      }
      expect(rejected).to.be.instanceOf(FnrError)
      expect((rejected as FnrError).details.functionConfig).to.equal('ns/fc')
      expect((rejected as FnrError).message.match(/FunctionConfig ns\/fc/g)).to.have.length(1)
    })
  })
})
