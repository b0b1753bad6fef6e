/**
 * Where the pod runtime learns what to run in a function image (src/lib/pods/cluster/image-metadata.ts):
 * the registry's command and digest (asked with requireCommand and the call's signal), or a fixed
 * map or function, an unknown image being FailedPrecondition (never NotFound). The registry client
 * is a fake; the real one is in test/registry/.
 */
import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import {RegistryMetadataSource, StaticMetadataSource} from '../../src/lib/pods/cluster/image-metadata.js'
import type {RegistryClient} from '../../src/lib/registry/client.js'

describe('function image metadata', () => {
  it('from the registry: the command and digest, asked with requireCommand and the call\'s signal', async () => {
    const asked: Array<{image: string; options: unknown}> = []
    const client = {
      inspect: (async (image: string, options: unknown) => {
        asked.push({image, options})
        return {command: ['/usr/local/bin/function', '--x'], digest: 'sha256:abc'}
      }) as unknown as RegistryClient['inspect'],
    }
    const signal = new AbortController().signal
    expect(await new RegistryMetadataSource(client).describe('example.com/fn:v1', {signal})).to.deep.equal({command: ['/usr/local/bin/function', '--x'], digest: 'sha256:abc'})
    expect(asked).to.deep.equal([{image: 'example.com/fn:v1', options: {signal, requireCommand: true}}])
  })

  it('the registry\'s failure is the caller\'s', async () => {
    const client = {inspect: (async () => Promise.reject(new FnrError('Unavailable', 'registry down'))) as unknown as RegistryClient['inspect']}
    const err = await new RegistryMetadataSource(client).describe('example.com/fn:v1').catch((e: unknown) => e)
    expect((err as FnrError).message).to.equal('registry down')
  })

  it('a fixed map or function: a copy of the command, no digest; an unknown image or an empty command is FailedPrecondition', async () => {
    const command = ['/fn']
    const byMap = new StaticMetadataSource({'example.com/fn:v1': command, 'example.com/empty:v1': []})
    const info = await byMap.describe('example.com/fn:v1')
    expect(info).to.deep.equal({command: ['/fn']})
    info.command.push('changed')
    expect(command).to.deep.equal(['/fn'])
    for (const image of ['example.com/unknown:v1', 'example.com/empty:v1']) {
      const err = await byMap.describe(image).catch((e: unknown) => e)
      expect(err).to.be.instanceOf(FnrError)
      expect((err as FnrError).kind).to.equal('FailedPrecondition')
      expect((err as FnrError).message).to.equal(`no entrypoint is known for image "${image}"`)
    }
    const byFunction = new StaticMetadataSource((image) => (image.endsWith(':v2') ? ['/v2'] : undefined))
    expect(await byFunction.describe('example.com/fn:v2')).to.deep.equal({command: ['/v2']})
    expect(((await byFunction.describe('example.com/fn:v1').catch((e: unknown) => e)) as FnrError).kind).to.equal('FailedPrecondition')
  })
})
