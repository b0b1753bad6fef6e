/**
 * Bad exec runtime configuration (config.yaml and the functions directory): malformed YAML,
 * wrong shapes, traversal and symlink escapes, missing binaries, files that are not executable,
 * unreadable config paths. Each must be a Config error (exit 3 in the CLI) whose message names
 * the problem; none may crash or hang the loader.
 *
 * (pod-cache-config and the pod template ConfigMap belong to the pod runtime: pod-config.test.ts.)
 */
import {execFileSync} from 'node:child_process'
import {chmod, mkdir, symlink, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {expect} from 'chai'

import {loadExecConfig} from '../../src/lib/config/exec-config.js'
import {FnrError} from '../../src/lib/errors.js'
import {registerSummary, tally, withinHangLimit} from '../support/reliability/tally.js'
import {TempDirs, writeExecutable} from '../support/tmp.js'

registerSummary()

interface ConfigCase {
  label: string
  /** config.yaml contents, or a path (relative to the test dir) to use as the config. */
  text?: string
  configPath?: string
  functionsDir?: string
  message: RegExp
}

const entry = (fn: string, images = '[x.io/fn:v1]'): string => `functions:\n- function: ${fn}\n  images: ${images}\n`

function billionLaughs(): string {
  const lines = ['a0: &a0 [x]']
  for (let i = 1; i <= 9; i++) lines.push(`a${i}: &a${i} [${Array.from({length: 10}, () => `*a${i - 1}`).join(', ')}]`)
  return `${lines.join('\n')}\nfunctions: *a9\n`
}

const CASES: ConfigCase[] = [
  // Malformed YAML.
  {label: 'unclosed flow sequence', text: 'functions: [\n', message: /cannot parse exec config/},
  {label: 'unterminated quote', text: 'functions:\n- function: "cat\n  images: [a]\n', message: /cannot parse exec config/},
  {label: 'tab indentation', text: 'functions:\n\t- function: cat\n', message: /cannot parse exec config/},
  {label: 'duplicate keys', text: 'functions: []\nfunctions: []\n', message: /cannot parse exec config/},
  {label: 'billion laughs', text: billionLaughs(), message: /cannot parse exec config/},
  {label: 'nested 10,000 deep', text: `functions: ${'['.repeat(10_000)}${']'.repeat(10_000)}\n`, message: /cannot parse exec config|must be a mapping/},
  {label: 'binary garbage', text: '\u0000\u0001\u0002\uffff\u00ff\u0007', message: /cannot parse exec config|expected a mapping/},
  {label: 'binary garbage with flow brackets', text: '{{{:::\u0000', message: /cannot parse exec config|expected a mapping/},
  {label: 'bad document separator', text: 'functions: []\n--- x\nfoo: [\n', message: /cannot parse exec config/},
  // Wrong shapes.
  {label: 'top level is a list', text: '- function: cat\n  images: [a]\n', message: /expected a mapping with a "functions" list/},
  {label: 'top level is a string', text: 'just text\n', message: /expected a mapping/},
  {label: 'top level is a number', text: '42\n', message: /expected a mapping/},
  {label: 'functions is a number', text: 'functions: 5\n', message: /"functions" must be a list/},
  {label: 'functions is a map', text: 'functions: {a: b}\n', message: /"functions" must be a list/},
  {label: 'an entry is a number', text: 'functions:\n- 5\n', message: /functions\[0\] must be a mapping/},
  {label: 'an entry is null', text: 'functions:\n- \n', message: /functions\[0\] must be a mapping/},
  {label: 'an entry is a list', text: 'functions:\n- [cat]\n', message: /functions\[0\] must be a mapping/},
  {label: 'function is a number', text: 'functions:\n- function: 5\n  images: [a]\n', message: /"function" must be a string/},
  {label: 'function is missing', text: 'functions:\n- images: [a]\n', message: /"function" must be a string/},
  {label: 'images is missing', text: 'functions:\n- function: cat\n', message: /"images" must be a list of non-empty strings/},
  {label: 'images is a string', text: entry('cat', 'x.io/fn:v1'), message: /"images" must be a list/},
  {label: 'an image is a number', text: entry('cat', '[5]'), message: /"images" must be a list of non-empty strings/},
  {label: 'an image is empty', text: entry('cat', '[""]'), message: /non-empty strings/},
  {label: 'an image is blank', text: entry('cat', '["  "]'), message: /non-empty strings/},
  {label: 'an image is null', text: entry('cat', '[null]'), message: /non-empty strings/},
  {label: 'the second entry is bad', text: `${entry('cat')}- function: nope\n  images: [y.io/b:v1]\n`, message: /functions\[1\] \(function "nope"\): binary .* does not exist/},
  // Where the binary is.
  {label: 'empty function name', text: entry('""'), message: /the function name is empty or invalid/},
  {label: 'NUL in the function name', text: entry('"ca\\0t"'), message: /the function name is empty or invalid/},
  {label: 'absolute path', text: entry('/bin/sh'), message: /absolute paths are not allowed/},
  {label: 'parent directory', text: entry('../outside/tool'), message: /".." is not allowed/},
  {label: 'parent directory in the middle', text: entry('sub/../../outside/tool'), message: /".." is not allowed/},
  {label: 'backslash traversal', text: entry('"sub\\\\..\\\\..\\\\outside\\\\tool"'), message: /".." is not allowed/},
  {label: 'only ..', text: entry('..'), message: /".." is not allowed/},
  {label: 'symlink to /bin/sh', text: entry('link-out'), message: /resolves to .*, outside the functions directory/},
  {label: 'symlink to a directory outside', text: entry('link-out-dir/tool'), message: /outside the functions directory/},
  {label: 'symlink chain that ends outside', text: entry('link-chain'), message: /outside the functions directory/},
  {label: 'symlink loop', text: entry('link-loop-a'), message: /does not exist/},
  {label: 'dangling symlink', text: entry('dangling'), message: /does not exist/},
  {label: 'missing binary', text: entry('missing'), message: /binary .*missing does not exist/},
  {label: 'a file used as a directory', text: entry('cat/inner'), message: /does not exist/},
  {label: 'not executable (mode 644)', text: entry('noexec'), message: /is not executable/},
  {label: 'a directory', text: entry('adir'), message: /is not a regular file/},
  {label: 'the functions directory itself', text: entry('.'), message: /is not a regular file/},
  {label: 'a FIFO', text: entry('fifo'), message: /is not a regular file/},
  {label: 'a 300-character name', text: entry('f'.repeat(300)), message: /does not exist/},
  {label: 'a 5000-character name', text: entry('f'.repeat(5000)), message: /does not exist/},
  // The config file and the functions directory themselves.
  {label: 'config file missing', configPath: 'no-such-config.yaml', message: /cannot read exec config .*ENOENT/},
  {label: 'config path is a directory', configPath: 'functions', message: /cannot read exec config .*EISDIR/},
  {label: 'config path is a FIFO (would block)', configPath: 'config.fifo', message: /cannot read exec config .*not a regular file/},
  {label: 'config path is /dev/zero (would never end)', configPath: '/dev/zero', message: /cannot read exec config .*not a regular file/},
  {label: 'config path is a dangling symlink', configPath: 'config-dangling.yaml', message: /cannot read exec config .*ENOENT/},
  {label: 'config path is a symlink loop', configPath: 'config-loop.yaml', message: /cannot read exec config .*ELOOP/},
  {label: 'config path goes through a file', configPath: 'functions/cat/config.yaml', message: /cannot read exec config .*ENOTDIR/},
  {label: 'config path too long', configPath: `${'c'.repeat(5000)}.yaml`, message: /cannot read exec config .*ENAMETOOLONG/},
  {label: 'functions directory missing', text: entry('cat'), functionsDir: 'no-such-dir', message: /functions directory "[^"]*no-such-dir" does not exist/},
  {label: 'functions directory is a file', text: entry('tool'), functionsDir: 'functions/cat', message: /does not exist/},
]

describe('reliability: bad exec runtime configuration', () => {
  const temp = new TempDirs()
  let dir: string
  let functionsDir: string

  before(async () => {
    dir = await temp.make('fnr-rel-config-')
    functionsDir = path.join(dir, 'functions')
    const outside = path.join(dir, 'outside')
    await mkdir(path.join(functionsDir, 'adir'), {recursive: true})
    await mkdir(path.join(functionsDir, 'sub'), {recursive: true})
    await mkdir(outside, {recursive: true})
    await writeExecutable(path.join(functionsDir, 'cat'), '#!/bin/sh\nexec cat\n')
    await writeExecutable(path.join(outside, 'tool'), '#!/bin/sh\nexec cat\n')
    await writeFile(path.join(functionsDir, 'noexec'), '#!/bin/sh\nexec cat\n')
    await chmod(path.join(functionsDir, 'noexec'), 0o644)
    await symlink('/bin/sh', path.join(functionsDir, 'link-out'))
    await symlink(outside, path.join(functionsDir, 'link-out-dir'))
    await symlink('link-out', path.join(functionsDir, 'link-chain'))
    await symlink('link-loop-b', path.join(functionsDir, 'link-loop-a'))
    await symlink('link-loop-a', path.join(functionsDir, 'link-loop-b'))
    await symlink('nowhere', path.join(functionsDir, 'dangling'))
    execFileSync('mkfifo', [path.join(functionsDir, 'fifo')])
    execFileSync('mkfifo', [path.join(dir, 'config.fifo')])
    await symlink('nowhere.yaml', path.join(dir, 'config-dangling.yaml'))
    await symlink('config-loop.yaml', path.join(dir, 'config-loop.yaml'))
  })

  after(() => temp.cleanup())

  CASES.forEach((c, i) => {
    it(c.label, async () => {
      tally.tried('exec config', {config: c.text, configPath: c.configPath, functionsDir: c.functionsDir})
      let configPath: string
      if (c.configPath !== undefined) configPath = path.isAbsolute(c.configPath) ? c.configPath : path.join(dir, c.configPath)
      else {
        configPath = path.join(dir, `config-${i}.yaml`)
        await writeFile(configPath, c.text!)
      }
      const fnsDir = c.functionsDir === undefined ? functionsDir : path.join(dir, c.functionsDir)
      let error: unknown
      try {
        await withinHangLimit(`exec config ${c.label}`, loadExecConfig({configPath, functionsDir: fnsDir}))
      } catch (err) {
        error = err
      }
      if (!(error instanceof FnrError)) tally.crash(`exec config ${c.label}`, `not an FnrError: ${String(error)}`)
      expect(error, `${c.label}: loading must fail`).to.be.instanceOf(FnrError)
      const e = error as FnrError
      expect(e.kind, e.message).to.equal('Config')
      expect(e.exitCode).to.equal(3)
      expect(e.message).to.match(c.message)
      expect(e.message, 'one line').to.not.contain('\n')
    })
  })

  it('a valid config next to the bad ones still loads (symlinks inside the directory are fine)', async () => {
    await symlink('cat', path.join(functionsDir, 'link-in'))
    const configPath = path.join(dir, 'good.yaml')
    await writeFile(configPath, `${entry('cat')}- function: link-in\n  images: [x.io/link:v1]\n`)
    const config = await loadExecConfig({configPath, functionsDir})
    expect(config.lookup('x.io/fn:v1')?.binary).to.equal(path.join(functionsDir, 'cat'))
    expect(config.lookup('x.io/link:v1')?.binary).to.equal(path.join(functionsDir, 'cat'))
  })
})
