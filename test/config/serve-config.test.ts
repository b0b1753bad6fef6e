/**
 * src/lib/config/serve-config.ts: what `fnr serve` reads from its flags and environment with
 * Porch's meaning (0 or less is the default, empty env is unset), and --pod-cache-config read once
 * for the pod runtime and the response cache.
 */
import {writeFile} from 'node:fs/promises'
import path from 'node:path'

import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import {
  DEFAULT_MAX_PARALLEL_PODS,
  DEFAULT_MAX_WAITLIST_LENGTH,
  FUNCTION_CONFIG_SOURCES,
  loadServePodCacheConfig,
  parseFunctionConfigSource,
  parsePinImageDigests,
  parsePodAddress,
  pinsImageDigests,
  podRuntimeEnv,
  positiveOr,
} from '../../src/lib/config/serve-config.js'
import type {Logger} from '../../src/lib/telemetry/log.js'
import {memoryLogger, type LogLine} from '../support/memory-logger.js'
import {TempDirs} from '../support/tmp.js'

function recordingLogger(): {logger: Logger; lines: LogLine[]} {
  const logger = memoryLogger()
  return {logger, lines: logger.lines}
}

describe('config/serve-config: flags', () => {
  it('reads a count of 0 or less as Porch\'s default (2 and 1)', () => {
    expect(DEFAULT_MAX_WAITLIST_LENGTH).to.equal(2)
    expect(DEFAULT_MAX_PARALLEL_PODS).to.equal(1)
    expect(positiveOr(0, DEFAULT_MAX_WAITLIST_LENGTH)).to.equal(2)
    expect(positiveOr(-3, DEFAULT_MAX_PARALLEL_PODS)).to.equal(1)
    expect(positiveOr(5, 2)).to.equal(5)
    expect(positiveOr(1, 2)).to.equal(1)
  })

  it('--pin-image-digests: auto, true, and anything else false', () => {
    expect(parsePinImageDigests('auto')).to.equal('auto')
    expect(parsePinImageDigests('true')).to.equal(true)
    expect(parsePinImageDigests('false')).to.equal(false)
    expect(parsePinImageDigests('')).to.equal(false)
  })

  it('pins digests always, never, or (auto, the default) when the response cache is on', () => {
    expect(pinsImageDigests(true, false)).to.equal(true)
    expect(pinsImageDigests(false, true)).to.equal(false)
    expect(pinsImageDigests('auto', true)).to.equal(true)
    expect(pinsImageDigests('auto', false)).to.equal(false)
    expect(pinsImageDigests(undefined, true)).to.equal(true)
    expect(pinsImageDigests(undefined, false)).to.equal(false)
  })

  it('--pod-address: pod-ip, else service', () => {
    expect(parsePodAddress('pod-ip')).to.equal('pod-ip')
    expect(parsePodAddress('service')).to.equal('service')
    expect(parsePodAddress('POD-IP')).to.equal('service')
  })

  it('--function-config-source: the four values, trimmed and in any case', () => {
    expect(FUNCTION_CONFIG_SOURCES).to.deep.equal(['auto', 'files', 'crd', 'both'])
    for (const v of FUNCTION_CONFIG_SOURCES) expect(parseFunctionConfigSource(v)).to.equal(v)
    expect(parseFunctionConfigSource(' CRD ')).to.equal('crd')
  })

  it('--function-config-source: anything else is a Usage error naming the values', () => {
    for (const bad of ['', 'file', 'crds', 'none']) {
      let err: unknown
      try {
        parseFunctionConfigSource(bad)
      } catch (e) {
        err = e
      }
      expect(err, bad).to.be.instanceOf(FnrError)
      expect((err as FnrError).kind).to.equal('Usage')
      expect((err as FnrError).message).to.equal(`--function-config-source must be auto, files, crd or both, got ${JSON.stringify(bad)}`)
    }
  })
})

describe('config/serve-config: environment', () => {
  it('reads WRAPPER_SERVER_IMAGE and FNR_DNS_SERVER', () => {
    expect(podRuntimeEnv({WRAPPER_SERVER_IMAGE: 'r.io/wrapper:v1', FNR_DNS_SERVER: '10.0.0.10'})).to.deep.equal({wrapperServerImage: 'r.io/wrapper:v1', dnsServer: '10.0.0.10'})
  })

  it('treats an empty value as unset, and leaves out what is not there', () => {
    expect(podRuntimeEnv({WRAPPER_SERVER_IMAGE: '', FNR_DNS_SERVER: ''})).to.deep.equal({})
    expect(podRuntimeEnv({})).to.deep.equal({})
    expect(Object.keys(podRuntimeEnv({FNR_DNS_SERVER: '1.1.1.1'}))).to.deep.equal(['dnsServer'])
  })
})

describe('config/serve-config: --pod-cache-config', () => {
  const temp = new TempDirs()
  after(() => temp.cleanup())
  const base = {path: '', podRuntime: true, responseCache: false, crdOnly: false, strict: false}
  const GOOD = '- name: example.com/fn:v1\n  timeToLive: 10m\n'
  const BAD_ENTRY = '- name: example.com/fn:v1\n  maxWaitlistLength: lots\n'

  it('does not read the file with --function-config-source=crd, nor when nothing needs it', async () => {
    const {logger, lines} = recordingLogger()
    const missing = path.join(await temp.make(), 'nope.yaml')
    for (const o of [{...base, path: missing, crdOnly: true}, {...base, path: missing, podRuntime: false, responseCache: false}]) {
      const config = await loadServePodCacheConfig(o, logger)
      expect(config.entries).to.deep.equal([])
      expect(config.source).to.equal('')
    }
    expect(lines).to.deep.equal([])
  })

  it('reads a good file for the pod runtime', async () => {
    const file = path.join(await temp.make(), 'pcc.yaml')
    await writeFile(file, GOOD)
    const {logger, lines} = recordingLogger()
    const config = await loadServePodCacheConfig({...base, path: file}, logger)
    expect(config.entries.map((e) => e.name)).to.deep.equal(['example.com/fn:v1'])
    expect(config.source).to.equal(file)
    expect(lines).to.deep.equal([])
  })

  it('says at info level that a missing file means the flag defaults (pod runtime on)', async () => {
    const file = path.join(await temp.make(), 'missing.yaml')
    const {logger, lines} = recordingLogger()
    const config = await loadServePodCacheConfig({...base, path: file}, logger)
    expect(config.entries).to.deep.equal([])
    expect(lines).to.deep.equal([{level: 'info', msg: 'no pod cache config; using the flag defaults for every image', fields: {path: file}}])
  })

  it('logs the file\'s warnings for the pod runtime (lenient, the default), and says nothing of them for the response cache alone', async () => {
    const file = path.join(await temp.make(), 'pcc.yaml')
    await writeFile(file, BAD_ENTRY)
    const pods = recordingLogger()
    const config = await loadServePodCacheConfig({...base, path: file}, pods.logger)
    expect(config.warnings).to.have.length.greaterThan(0)
    expect(pods.lines.map((l) => l.level)).to.deep.equal(config.warnings.map(() => 'warn'))
    expect(pods.lines.map((l) => l.msg)).to.deep.equal(config.warnings)
    const cacheOnly = recordingLogger()
    await loadServePodCacheConfig({...base, path: file, podRuntime: false, responseCache: true}, cacheOnly.logger)
    expect(cacheOnly.lines).to.deep.equal([])
  })

  it('with --strict-config, a bad file stops the pod runtime with a Config error', async () => {
    const file = path.join(await temp.make(), 'pcc.yaml')
    await writeFile(file, BAD_ENTRY)
    const {logger} = recordingLogger()
    let err: unknown
    try {
      await loadServePodCacheConfig({...base, path: file, strict: true}, logger)
    } catch (e) {
      err = e
    }
    expect(err).to.be.instanceOf(FnrError)
    expect((err as FnrError).kind).to.equal('Config')
    expect((err as FnrError).message).to.include(`pod cache config ${file} entry 1`)
  })

  it('with --strict-config and only the response cache, a bad file loses the switches with one warning', async () => {
    const file = path.join(await temp.make(), 'pcc.yaml')
    await writeFile(file, 'a: [unclosed\n')
    const {logger, lines} = recordingLogger()
    const config = await loadServePodCacheConfig({...base, path: file, strict: true, podRuntime: false, responseCache: true}, logger)
    expect(config.entries).to.deep.equal([])
    expect(lines).to.have.length(1)
    expect(lines[0]!.level).to.equal('warn')
    expect(lines[0]!.msg).to.equal('response cache: ignoring the per-image switches of an unreadable pod cache config')
    expect(String(lines[0]!.fields?.error)).to.match(/is not valid YAML/)
  })
})
