/**
 * How fnr eval and fnr render report failures (src/cli/render-error.ts: errorFormFor, kptErrorLine,
 * exitCodeIn) and how their kpt flags are read (src/cli/eval-flags.ts): the pure parts, without a
 * process. test/commands/eval-kpt-cli.test.ts runs them beside kpt.
 */
import {expect} from 'chai'

import {EVAL_FLAG_SPECS, evalOptionsFromFlags, splitFunctionConfigArgs} from '../../src/cli/eval-flags.js'
import {errorFormFor, exitCodeIn, kptErrorLine, renderError} from '../../src/cli/render-error.js'
import {FnrError} from '../../src/lib/errors.js'
import {parseWithSpecs} from '../../src/lib/flags/spec.js'

/** evalOptionsFromFlags on a command line, as the fast path parses it. */
function evalOptions(argv: string[]): ReturnType<typeof evalOptionsFromFlags> {
  const {flagArgs, fnConfigArgs} = splitFunctionConfigArgs(argv)
  const {values, given, positionals} = parseWithSpecs(flagArgs, EVAL_FLAG_SPECS)
  return evalOptionsFromFlags(values, given, fnConfigArgs, positionals)
}

function usageMessage(argv: string[]): string {
  try {
    evalOptions(argv)
  } catch (err) {
    expect(err).to.be.instanceOf(FnrError)
    expect((err as FnrError).kind).to.equal('Usage')
    return (err as FnrError).message
  }
  throw new Error(`no error for ${argv.join(' ')}`)
}

describe('kpt\'s error form on eval and render', () => {
  it('is the default; --exit-codes fnr (last one wins), FNR_EXIT_CODES=fnr and --json choose fnr\'s', () => {
    expect(errorFormFor('eval', [], {})).to.equal('kpt-eval')
    expect(errorFormFor('render', ['pkg'], {})).to.equal('kpt-render')
    expect(errorFormFor('eval', ['--exit-codes', 'fnr'], {})).to.equal('fnr')
    expect(errorFormFor('eval', ['--exit-codes=fnr'], {})).to.equal('fnr')
    expect(errorFormFor('eval', ['--exit-codes=fnr', '--exit-codes', 'kpt'], {})).to.equal('kpt-eval')
    expect(errorFormFor('render', [], {FNR_EXIT_CODES: 'fnr'})).to.equal('fnr')
    expect(errorFormFor('render', ['--exit-codes', 'kpt'], {FNR_EXIT_CODES: 'fnr'})).to.equal('kpt-render')
    expect(errorFormFor('eval', ['--json'], {})).to.equal('fnr')
    expect(errorFormFor('eval', [], {FNR_CONTENT_TYPE: 'JSON'})).to.equal('fnr')
    // render has no --json: it is an unknown flag there, reported in kpt's form.
    expect(errorFormFor('render', ['--json'], {})).to.equal('kpt-render')
    // After "--" it is function config, not a flag.
    expect(errorFormFor('eval', ['--', '--exit-codes=fnr'], {})).to.equal('kpt-eval')
  })

  it('reads as kpt prints: eval "error: …", render "Error: … " (command-line errors "error: …"), an unknown flag in kpt\'s words', () => {
    const notMapped = new FnrError('NotFound', 'function "x" is not in the exec config')
    expect(kptErrorLine(notMapped, 'kpt-eval')).to.equal('error: function "x" is not in the exec config\n')
    expect(kptErrorLine(notMapped, 'kpt-render')).to.equal('Error: function "x" is not in the exec config \n')
    const flag = new FnrError('Usage', 'Nonexistent flag: --bogus; did you mean --bogu?', {details: {commandLine: true, unknownFlag: '--bogus'}})
    expect(kptErrorLine(flag, 'kpt-eval')).to.equal('error: unknown flag: --bogus\n')
    expect(kptErrorLine(flag, 'kpt-render')).to.equal('error: unknown flag: --bogus\n')
    // A function's [FAIL] block is on the console already: kpt prints nothing more.
    expect(kptErrorLine(new FnrError('FunctionFailed', 'exited 3', {details: {consoleShown: true}}), 'kpt-render')).to.equal('')
    // A Kptfile kpt refuses: kpt's own text, as in fnr's form.
    expect(kptErrorLine(new FnrError('InvalidPackage', 'Error: No Kptfile found at "/p".'), 'kpt-render')).to.equal('Error: No Kptfile found at "/p". \n')
  })

  it('exits 1 for every kind in kpt\'s form, the kind\'s code in fnr\'s', () => {
    for (const [kind, code] of [['Usage', 2], ['NotFound', 4], ['DeadlineExceeded', 6], ['PermissionDenied', 5], ['FunctionFailed', 1]] as const) {
      const err = new FnrError(kind, 'x')
      expect(exitCodeIn(err, 'fnr'), kind).to.equal(code)
      expect(exitCodeIn(err, 'kpt-eval'), kind).to.equal(1)
      expect(exitCodeIn(err, 'kpt-render'), kind).to.equal(1)
    }
    const lines: string[] = []
    const sink = {write: (s: string) => lines.push(s)} as unknown as NodeJS.WritableStream
    expect(renderError(new FnrError('Usage', 'bad'), 0, sink, 'fnr')).to.equal(2)
    expect(renderError(new FnrError('Usage', 'bad'), 0, sink, 'kpt-eval')).to.equal(1)
    expect(lines).to.deep.equal(['fnr: bad (see --help)\n', 'error: bad\n'])
  })
})

describe('kpt\'s command line on fnr eval (flags to options)', () => {
  it('-i is --image; --input has no short form; no DIR is the current directory, in place; "-" is stdin', () => {
    const o = evalOptions(['-i', 'fnr.local/set-namespace:v0.4', '--', 'namespace=x'])
    expect(o.image).to.equal('fnr.local/set-namespace:v0.4')
    expect(o.inputs).to.deep.equal(['.'])
    expect(o.output).to.equal('.')
    expect(evalOptions(['-', '--exec', 'cat'])).to.include({output: 'stdout'}).and.to.have.deep.property('inputs', [])
    expect(evalOptions(['--input', 'a', '--input', 'b', '--exec', 'cat'])).to.have.deep.property('inputs', ['a', 'b'])
    expect(evalOptions(['pkg', '--exec', 'cat', '-o', 'unwrap'])).to.include({output: 'unwrap'})
  })

  it('a repeatable flag takes one value each time, as kpt\'s (never the DIR after it: `-e A=b pkg`)', () => {
    for (const [name, spec] of Object.entries(EVAL_FLAG_SPECS)) {
      if ('multiple' in spec && spec.multiple) expect('multipleNonGreedy' in spec && spec.multipleNonGreedy, name).to.equal(true)
    }
    expect(evalOptions(['-e', 'A=b', 'pkg', '--exec', 'cat'])).to.include({output: 'pkg'}).and.to.have.deep.property('env', ['A=b'])
  })

  it('refuses what kpt refuses, in kpt\'s words', () => {
    expect(usageMessage(['pkg', '--exec', 'cat', '-m'])).to.equal('--include-meta-resources is no longer necessary because meta resources are now included by default')
    expect(usageMessage(['pkg', '--exec', 'cat', '-s'])).to.equal('--type must be specified if saving functions to Kptfile (--save=true)')
    expect(usageMessage(['pkg', '--exec', 'cat', '-s', '-t', 'other'])).to.equal('--type must be either `mutator` or `validator`')
    expect(usageMessage(['pkg', '--exec', 'cat', '--image-pull-policy', 'sometimes'])).to.equal('invalid argument "sometimes" for "--image-pull-policy" flag: must be one of: Always, IfNotPresent, Never')
    expect(usageMessage(['a', 'b', '--exec', 'cat'])).to.match(/^0 or 1 arguments supported, function arguments go after '--'/)
    for (const flag of [['--network'], ['--as-current-user'], ['--mount', 'type=bind,src=/a,dst=/b']]) {
      expect(usageMessage(['pkg', '--exec', 'cat', ...flag]), flag[0]).to.match(/can only be used with container functions/)
    }
  })

  it('accepts kpt\'s flags where they hold, and names the runtime where they cannot', () => {
    // -t without --save is accepted and unused, as kpt does.
    expect(evalOptions(['pkg', '--exec', 'cat', '-t', 'anything']).save).to.equal(undefined)
    expect(evalOptions(['pkg', '--exec', 'cat', '-s', '-t', 'validator']).save).to.deep.equal({type: 'validator', dir: 'pkg'})
    expect(evalOptions(['-', '--exec', 'cat', '-s', '-t', 'mutator']).save).to.deep.equal({type: 'mutator', dir: ''})
    for (const policy of ['Always', 'ifnotpresent', 'never']) expect(() => evalOptions(['pkg', '--exec', 'cat', '--image-pull-policy', policy])).not.to.throw()
    expect(() => evalOptions(['pkg', '-i', 'x', '--network', '--as-current-user', '-k', 'kw', '--allow-alpha-wasm'])).not.to.throw()
    // --mount goes to a container runtime; eval.ts refuses it for an image the exec config maps.
    expect(evalOptions(['pkg', '-i', 'x', '--mount', 'type=bind,src=/a,dst=/b']).container?.mounts).to.deep.equal(['type=bind,src=/a,dst=/b'])
    expect(usageMessage(['pkg', '-i', 'x', '--runner', '127.0.0.1:1', '--network'])).to.match(/^--network cannot be passed through --runner/)
  })
})
