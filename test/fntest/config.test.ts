/**
 * fnr test: reading `.expected/config.yaml` as kpt's runner decodes it (the `kpt` shim that
 * kpt's case scripts see on their PATH is tested in kpt-shim.test.ts).
 */
import {expect} from 'chai'
import {writeFile} from 'node:fs/promises'
import path from 'node:path'

import {goRegExp, readCaseConfig} from '../../src/lib/fntest/discover.js'
import {TempDirs} from '../support/tmp.js'

describe('fnr test: case config', () => {
  const temp = new TempDirs()
  after(() => temp.cleanup())

  async function read(text: string) {
    const dir = await temp.make('fnr-cfg-')
    const file = path.join(dir, 'config.yaml')
    await writeFile(file, text)
    return readCaseConfig(file, 'c')
  }

  const defaults = {exitCode: 0, disableOutputTruncate: false, skip: false, sequential: false, debug: false, warnings: []}

  it('reads kpt\'s keys: args become key=value, exitCode, stdErr, fnConfig, timeout', async () => {
    const c = await read('testType: eval\nexitCode: 1\nstdErr: boom\nargs:\n  namespace: prod\n  replicas: 3\n  tag: 1.20\n  empty:\nimage: x:v1\ntimeout: 90s\ndisableOutputTruncate: true\n')
    expect(c).to.deep.equal({...defaults, testType: 'eval', exitCode: 1, stdErr: 'boom', args: ['namespace=prod', 'replicas=3', 'tag=1.20', 'empty='], image: 'x:v1', timeoutMs: 90_000, disableOutputTruncate: true})
    expect(await read('')).to.deep.equal(defaults)
    expect(await read('# only a comment\n')).to.deep.equal(defaults)
    // kpt's render cases, and the harness keys that change how a case runs or is compared
    expect(
      await read(
        'testType: render\nallowExec: true\nskip: true\nsequential: true\ndebug: true\nimagePullPolicy: IfNotPresent\nruntimes: [docker]\nstdOut: out\nstdErrStripLines: [a]\nactualStripLines: [b]\ndiffStripRegEx: "^\\\\+$"\nincludeMetaResources: true\n',
      ),
    ).to.deep.equal({
      ...defaults,
      testType: 'render',
      allowExec: true,
      skip: true,
      sequential: true,
      debug: true,
      imagePullPolicy: 'ifnotpresent',
      runtimes: ['docker'],
      stdOut: 'out',
      stdErrStripLines: ['a'],
      actualStripLines: ['b'],
      diffStripRegEx: '^\\+$',
    })
    // kpt keys fnr cannot honour: warnings, the case still runs
    expect((await read('network: true\nallowWasm: true\ntag: "~0.4"\nallowNetwork: false\n')).warnings).to.deep.equal([
      '.expected/config.yaml: network is not used (fnr runs no containers: the function has the network access its runtime gives)',
      '.expected/config.yaml: allowWasm is not used (fnr does not run wasm functions)',
      '.expected/config.yaml: tag "~0.4" is not used (a tag constraint is resolved against a registry by kpt; fnr matches the image name as given)',
    ])
  })

  it('ignores keys that are not kpt\'s, as kpt\'s YAML decoder does (exact, case-sensitive names)', async () => {
    const c = await read('apiVersion: v1\nkind: TestCase\nmetadata:\n  name: x\nrunCount: 2\nnotIdempotent: true\nStdErrRegEx: "(unclosed"\nexitcode: 3\nbogus: [1, 2]\nenv: {A: b}\n')
    expect(c).to.deep.equal(defaults)
    // null values are the zero values
    expect(await read('exitCode:\nimage:\nskip:\nargs:\n')).to.deep.equal(defaults)
    // Go's decoder turns any scalar into a string field
    expect((await read('image: 123\nstdErr: true\n'))).to.deep.include({image: '123', stdErr: 'true'})
  })

  it('refuses a known key with a value of the wrong type, naming the key (the case is then an error)', async () => {
    const bad: Array<[string, RegExp]> = [
      ['testType: wasm\n', /: testType: Unsupported value: "wasm": supported values: "eval", "render"$/],
      ['exitCode: x\n', /: exitCode: Invalid value: "x": must be of type integer$/],
      ['exitCode: 1.5\n', /: exitCode: Invalid value: 1\.5: must be of type integer$/],
      ['skip: yes\n', /: skip: Invalid value: "yes": must be of type boolean$/],
      ['args: [a]\n', /: args: Invalid value: "array": must be of type object$/],
      ['image: a\nexecPath: b\n', /give image or execPath, not both/],
      ['stdErrRegEx: "("\n', /: stdErrRegEx: Invalid value: "\(": must be a regular expression/],
      ['runtimes: docker\n', /: runtimes: Invalid value: "docker": must be of type array$/],
      ['image: {a: b}\n', /: image: Invalid value: "object": must be of type string$/],
      ['imagePullPolicy: sometimes\n', /: imagePullPolicy: Invalid value: "sometimes": must be one of Always, IfNotPresent, Never/],
      ['timeout: soon\n', /: timeout: Invalid value: "soon": must be a duration/],
      ['- a\n', /config\.yaml: Invalid value: "array": must be of type object$/],
      ['a: [\n', /config\.yaml: /],
    ]
    for (const [text, message] of bad) {
      let error: Error | undefined
      try {
        await read(text)
      } catch (err) {
        error = err as Error
      }
      expect(error?.message, text).to.match(/^test case c: \.expected\/config\.yaml/)
      expect(error?.message, text).to.match(message)
      expect(error?.message.includes('\n'), text).to.equal(false)
    }
  })

  it('lists every field error of the file, each as kubectl names the field', async () => {
    const err = await read('skip: 1\nexitCode: "2"\nargs: {a: [1]}\nstdErrStripLines: [a, {b: c}]\nrunCount: x\n').then(
      () => undefined,
      (e: Error & {kind?: string; details?: {fieldErrors?: string[]}}) => e,
    )
    expect(err?.kind).to.equal('Config')
    expect(err?.details?.fieldErrors).to.deep.equal([
      'exitCode: Invalid value: "2": must be of type integer',
      'skip: Invalid value: 1: must be of type boolean',
      'stdErrStripLines[1]: Invalid value: "object": must be of type string',
      'args.a: Invalid value: "array": must be of type string',
    ])
    expect(err?.message).to.equal(`test case c: .expected/config.yaml: ${err!.details!.fieldErrors!.join('; ')}`)
  })

  it('reads Go regular expressions: a leading flag group becomes flags, ^ and $ anchor the whole text', () => {
    expect(goRegExp('^b$').test('a\nb\nc')).to.equal(false)
    expect(goRegExp('(?m)^b$').test('a\nb\nc')).to.equal(true)
    expect(goRegExp('(?s)a.b').test('a\nb')).to.equal(true)
    expect(goRegExp('No such image|image not known').test('Error: image not known')).to.equal(true)
    expect(() => goRegExp('(?U)a')).to.throw(/not supported/)
  })
})
