/**
 * One flag definition style: a FlagSpec makes the oclif flag (flags.ts oclifFlag) and is parsed
 * the same way without oclif (spec.ts parseWithSpecs, the eval fast path): go-bool, options,
 * min/max, env, multiple.
 */
import {expect} from 'chai'

import {oclifFlag, podFlags, runnerTemplateFlags} from '../../src/cli/flags.js'
import {POD_FLAG_SPECS} from '../../src/lib/flags/runner-flag-specs.js'
import {parseWithSpecs, type FlagSpecs} from '../../src/lib/flags/spec.js'
import WrapperServer from '../../src/commands/wrapper-server.js'
import {FnrError} from '../../src/lib/errors.js'
import {WRAPPER_FLAG_SPECS, parseWrapperArgs} from '../../src/lib/wrapper.js'

const SPECS = {
  strict: {kind: 'go-bool', summary: 's', default: false},
  mode: {kind: 'string', summary: 'm', default: 'auto', options: ['auto', 'true', 'false']},
  retries: {kind: 'integer', summary: 'r', default: 1, min: 0, max: 5},
  wait: {kind: 'duration', summary: 'w', default: 1000, defaultHelp: '1s'},
  image: {kind: 'string', summary: 'i', env: 'FNR_TEST_SPEC_IMAGE'},
  tag: {kind: 'string', summary: 't', multiple: true, multipleNonGreedy: true},
} satisfies FlagSpecs

describe('flag specs: one definition for oclif and the oclif-free parser', () => {
  afterEach(() => delete process.env.FNR_TEST_SPEC_IMAGE)

  it('parseWithSpecs converts each kind and checks options and bounds', () => {
    const {values, given, positionals} = parseWithSpecs(['--strict', 'true', '--mode=false', '--retries', '5', '--wait', '1m30s', '--tag', 'a', '--tag', 'b', 'dir'], SPECS)
    expect(values).to.deep.equal({strict: true, mode: 'false', retries: 5, wait: 90_000, image: undefined, tag: ['a', 'b']})
    expect([...given].sort()).to.deep.equal(['mode', 'retries', 'strict', 'tag', 'wait'])
    expect(positionals).to.deep.equal(['dir'])
    expect(parseWithSpecs([], SPECS).values).to.include({strict: false, mode: 'auto', retries: 1, wait: 1000})
    const usage = (argv: string[]): string => {
      try {
        parseWithSpecs(argv, SPECS)
      } catch (err) {
        expect(err).to.be.instanceOf(FnrError).with.property('kind', 'Usage')
        return (err as Error).message
      }
      throw new Error(`${argv.join(' ')} was accepted`)
    }
    expect(usage(['--strict', 'maybe'])).to.equal('Parsing --strict: expected true or false, got "maybe"')
    expect(usage(['--mode', 'on'])).to.equal('Expected --mode=on to be one of: auto, true, false')
    expect(usage(['--retries', '6'])).to.equal('Parsing --retries: expected an integer less than or equal to 5, got 6')
    expect(usage(['--retries=-1'])).to.equal('Parsing --retries: expected an integer greater than or equal to 0, got -1')
  })

  it('reads a flag\'s environment variable when the flag is not given', () => {
    process.env.FNR_TEST_SPEC_IMAGE = 'wrapper:v1'
    expect(parseWithSpecs([], SPECS).values.image).to.equal('wrapper:v1')
    expect(parseWithSpecs(['--image', 'x'], SPECS).values.image).to.equal('x')
  })

  it('oclifFlag carries the same definition into oclif', async () => {
    const mode = oclifFlag(SPECS.mode)
    expect(mode).to.include({type: 'option', default: 'auto', summary: 'm'})
    expect(mode.options).to.deep.equal(['auto', 'true', 'false'])
    const retries = oclifFlag(SPECS.retries)
    expect(await retries.parse('5', {} as never, retries as never)).to.equal(5)
    let rejected = false
    await retries.parse('6', {} as never, retries as never).catch(() => (rejected = true))
    expect(rejected).to.equal(true)
    const strict = oclifFlag(SPECS.strict)
    expect(await strict.parse('false', {} as never, strict as never)).to.equal(false)
    expect(strict.helpValue).to.equal('true|false')
    expect(oclifFlag(SPECS.tag)).to.include({multiple: true, multipleNonGreedy: true})
    expect(oclifFlag(SPECS.image)).to.include({env: 'FNR_TEST_SPEC_IMAGE'})
    const wait = oclifFlag(SPECS.wait)
    expect(await (wait.defaultHelp as () => Promise<string>)()).to.equal('1s')
    // serve's and the pods commands' groups are made from their specs.
    expect(Object.keys(podFlags)).to.deep.equal(Object.keys(POD_FLAG_SPECS))
    expect(runnerTemplateFlags['wrapper-server-image']).to.include({env: 'WRAPPER_SERVER_IMAGE'})
  })

  it('the wrapper-server\'s oclif command and its packaged parser read the same specs', () => {
    expect(Object.keys(WrapperServer.flags)).to.deep.equal(Object.keys(WRAPPER_FLAG_SPECS))
    for (const [name, spec] of Object.entries(WRAPPER_FLAG_SPECS)) {
      expect(WrapperServer.flags[name as keyof typeof WRAPPER_FLAG_SPECS], name).to.include({summary: spec.summary, default: 'default' in spec ? spec.default : undefined})
    }
    // Porch's template args; --log-format as every oclif command with --log-level takes it.
    const cli = parseWrapperArgs(['--port', '9446', '--max-request-body-size', '4096', '--log-format=text', '--grace-period', '2s', '--', 'fn'])
    expect(cli).to.deep.equal({verbosity: 2, logFormat: 'text', options: {port: 9446, maxRequestBodySize: 4096, entrypoint: ['fn'], gracePeriodMs: 2000}})
    expect(parseWrapperArgs(['-log-format', 'json', '--', 'fn']).logFormat).to.equal('json')
    expect(() => parseWrapperArgs(['--log-format=yaml', '--', 'fn'])).to.throw(FnrError, '--log-format')
  })
})
