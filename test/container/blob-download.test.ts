/**
 * RegistryClient.downloadBlob (src/lib/registry/client.ts), against an in-process registry on
 * loopback: a blob is streamed to a file and its digest checked; a transfer cut off half way is
 * retried from the start of the file; wrong bytes or a wrong size are refused; a 404 names the blob.
 */
import {expect} from 'chai'
import {createHash} from 'node:crypto'
import {readFile} from 'node:fs/promises'
import http from 'node:http'
import type {AddressInfo} from 'node:net'
import path from 'node:path'

import {FnrError} from '../../src/lib/errors.js'
import {RegistryClient} from '../../src/lib/registry/client.js'
import {parseImageReference} from '../../src/lib/registry/reference.js'
import {TempDirs} from '../support/tmp.js'

const sha = (b: Buffer): string => `sha256:${createHash('sha256').update(b).digest('hex')}`

describe('registry client: layer blobs streamed to a file', () => {
  const temp = new TempDirs()
  let server: http.Server
  let host = ''
  const good = Buffer.alloc(300_000, 'g')
  const flaky = Buffer.alloc(300_000, 'f')
  const bad = Buffer.from('what the manifest promised')
  let flakyAttempts = 0

  before(async () => {
    server = http.createServer((req, res) => {
      const digest = req.url?.split('/blobs/')[1]
      if (digest === sha(good)) return res.end(good)
      if (digest === sha(bad)) return res.end(Buffer.from('something else entirely'))
      if (digest === sha(flaky)) {
        // The first transfer stops half way (a reset connection); the retry is whole.
        if (flakyAttempts++ === 0) {
          res.writeHead(200, {'content-length': String(flaky.length)})
          res.write(flaky.subarray(0, 100_000), () => res.destroy())
          return
        }
        return res.end(flaky)
      }
      res.writeHead(404, {'content-type': 'application/json'})
      res.end(JSON.stringify({errors: [{code: 'BLOB_UNKNOWN', message: 'blob unknown to registry'}]}))
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    host = `127.0.0.1:${(server.address() as AddressInfo).port}`
  })
  after(async () => {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
    await temp.cleanup()
  })

  const client = (): RegistryClient => new RegistryClient({insecureLoopback: true, retryDelayMs: 1})
  const failure = (p: Promise<unknown>): Promise<FnrError | undefined> =>
    p.then(
      () => undefined,
      (e: unknown) => e as FnrError,
    )

  it('streams a blob to a file, checks its digest, and starts the file again when a transfer is retried', async () => {
    const dir = await temp.make('fnr-blob-')
    const c = client()
    try {
      const ref = parseImageReference(`${host}/fn/x:v1`)
      expect(await c.downloadBlob(ref, sha(good), path.join(dir, 'good'), {size: good.length})).to.equal(good.length)
      expect((await readFile(path.join(dir, 'good'))).equals(good)).to.equal(true)
      expect(await c.downloadBlob(ref, sha(flaky), path.join(dir, 'flaky'))).to.equal(flaky.length)
      expect(flakyAttempts).to.equal(2)
      expect((await readFile(path.join(dir, 'flaky'))).equals(flaky)).to.equal(true)
    } finally {
      c.close()
    }
  })

  it('refuses wrong bytes, a wrong size and a blob that is not there', async () => {
    const dir = await temp.make('fnr-blob-')
    const c = client()
    try {
      const ref = parseImageReference(`${host}/fn/x:v1`)
      const wrong = await failure(c.downloadBlob(ref, sha(bad), path.join(dir, 'bad')))
      expect([wrong?.kind, wrong?.message]).to.deep.equal(['Internal', `registry ${host} returned blob ${sha(Buffer.from('something else entirely'))} instead of ${sha(bad)} for image "${host}/fn/x:v1"`])
      const short = await failure(c.downloadBlob(ref, sha(good), path.join(dir, 'short'), {size: good.length + 1}))
      expect(short?.message).to.match(/returned 300000 bytes for blob .* the manifest says 300001/)
      const long = await failure(c.downloadBlob(ref, sha(good), path.join(dir, 'long'), {size: 10}))
      expect(long?.kind).to.equal('ResourceExhausted')
      const missing = await failure(c.downloadBlob(ref, sha(Buffer.from('nope')), path.join(dir, 'missing')))
      expect([missing?.kind, missing?.message]).to.deep.equal(['NotFound', `blob ${sha(Buffer.from('nope'))} of image "${host}/fn/x:v1" not found in registry ${host} (BLOB_UNKNOWN: blob unknown to registry)`])
    } finally {
      c.close()
    }
  })
})
