/**
 * What an exec function's process is given, decided before it starts (src/lib/process/run.ts): the
 * minimal environment, the runner's proxy variables and the --exec-env names that are set, the
 * names --exec-env accepts, and the early answer for a call cancelled or past its deadline. The
 * processes themselves are in ./run.test.ts and test/process/serve-exec.test.ts.
 */
import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import {execEnvironment, minimalEnvironment, notStartable, parsePassEnv, PROXY_VARIABLES} from '../../src/lib/process/run.js'

describe('exec functions: environment and early answers', () => {
  it('the minimal environment: the runner\'s PATH, C.UTF-8, HOME=/tmp, TZ only when the runner has one, and what is added', () => {
    const env = minimalEnvironment({EXTRA: '1'})
    expect(env).to.deep.include({PATH: process.env.PATH, LANG: 'C.UTF-8', HOME: '/tmp', EXTRA: '1'})
    expect(Object.keys(env).sort()).to.deep.equal(['EXTRA', 'HOME', 'LANG', 'PATH', ...(process.env.TZ ? ['TZ'] : [])].sort())
    expect(minimalEnvironment({HOME: '/home/fn'}).HOME).to.equal('/home/fn')
  })

  it('passes the proxy variables that are set (any case) and the --exec-env names that are set, nothing else', () => {
    expect([...PROXY_VARIABLES]).to.deep.equal(['HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY', 'http_proxy', 'https_proxy', 'no_proxy'])
    const runner = {HTTP_PROXY: 'http://p:3128', no_proxy: '.svc', SECRET: 's', PASSED: 'yes', PATH: '/runner/bin'}
    const env = execEnvironment(['PASSED', 'UNSET'], runner)
    expect(env).to.deep.include({HTTP_PROXY: 'http://p:3128', no_proxy: '.svc', PASSED: 'yes', LANG: 'C.UTF-8', HOME: '/tmp'})
    expect(env).to.not.have.any.keys('SECRET', 'UNSET', 'HTTPS_PROXY')
    // PATH is the runner process's own, not the given environment's
    expect(env.PATH).to.equal(minimalEnvironment().PATH)
    expect(execEnvironment([], {})).to.deep.equal(minimalEnvironment())
  })

  it('--exec-env takes names comma-separated or repeated, trims blanks, and refuses anything that is not a variable name', () => {
    expect(parsePassEnv(['A,B', ' C ', '', 'd_1,,_E'])).to.deep.equal(['A', 'B', 'C', 'd_1', '_E'])
    expect(parsePassEnv([])).to.deep.equal([])
    for (const bad of ['1BAD', 'A=b', 'A-B', 'A B', 'é']) {
      const err = (() => {
        try {
          parsePassEnv([bad])
        } catch (e) {
          return e as FnrError
        }
        return undefined
      })()
      expect(err, bad).to.be.instanceOf(FnrError)
      expect(err!.kind, bad).to.equal('Usage')
      expect(err!.message, bad).to.equal(`--exec-env: ${JSON.stringify(bad)} is not an environment variable name (letters, digits and _, not starting with a digit)`)
    }
  })

  it('a call already cancelled is Cancelled, one past its deadline DeadlineExceeded; otherwise it may start', () => {
    const aborted = new AbortController()
    aborted.abort()
    expect(notStartable('img', undefined, aborted.signal)).to.deep.include({kind: 'Cancelled', message: 'function "img" was cancelled before it started'})
    expect(notStartable('img', Date.now() - 1, undefined)).to.deep.include({kind: 'DeadlineExceeded', message: 'deadline exceeded before function "img" started'})
    // cancelled wins over a passed deadline
    expect(notStartable('img', Date.now() - 1, aborted.signal)!.kind).to.equal('Cancelled')
    expect(notStartable('img', Date.now() + 60_000, new AbortController().signal)).to.equal(undefined)
    expect(notStartable('img', undefined, undefined)).to.equal(undefined)
  })
})
