/**
 * Registry credentials like docker: ~/.docker/config.json by default, credHelpers / credsStore run
 * the docker-credential-* helper (a fake helper script on PATH here), errors that name the fix.
 */
import {expect} from 'chai'
import {readFile} from 'node:fs/promises'
import path from 'node:path'

import {DockerConfig} from '../../src/lib/registry/auth.js'
import {TempDirs, writeExecutable} from '../support/tmp.js'

describe('registry credentials: docker config defaults and credential helpers', function () {
  this.timeout(30_000)
  const temp = new TempDirs()
  const savedPath = process.env.PATH
  after(async () => {
    process.env.PATH = savedPath
    await temp.cleanup()
  })

  it('runs docker-credential-<helper> get (credHelpers per registry, else credsStore), like docker', async () => {
    const bin = await temp.make('fnr-cred-bin-')
    const log = path.join(bin, 'calls.log')
    // A fake helper: records what it was asked, answers for two servers, "not found" otherwise.
    const helper = `#!/bin/sh
read server
echo "$(basename "$0") $1 $server" >> ${log}
case "$server" in
  registry.example.com) echo '{"ServerURL":"registry.example.com","Username":"alice","Secret":"s3cret"}' ;;
  https://index.docker.io/v1/) echo '{"ServerURL":"https://index.docker.io/v1/","Username":"<token>","Secret":"idtoken"}' ;;
  *) echo "credentials not found in native keychain"; exit 1 ;;
esac
`
    await writeExecutable(path.join(bin, 'docker-credential-fake'), helper)
    await writeExecutable(path.join(bin, 'docker-credential-store'), helper)
    process.env.PATH = `${bin}:${savedPath}`
    const config = DockerConfig.parse(
      JSON.stringify({auths: {'inline.example.com': {auth: Buffer.from('bob:pw').toString('base64')}}, credsStore: 'store', credHelpers: {'registry.example.com': 'fake'}}),
      '/home/me/.docker/config.json',
    )
    expect(config.credentialsFor('inline.example.com')).to.deep.equal({username: 'bob', password: 'pw'})
    expect(config.credentialsFor('registry.example.com')).to.deep.equal({username: 'alice', password: 's3cret'})
    expect(config.credentialsFor('docker.io')).to.deep.equal({identityToken: 'idtoken'})
    expect(config.credentialsFor('other.example.com')).to.equal(undefined)
    // Asked once per registry (cached), with docker's server names.
    expect(config.credentialsFor('registry.example.com')).to.deep.equal({username: 'alice', password: 's3cret'})
    expect((await readFile(log, 'utf8')).trim().split('\n')).to.deep.equal([
      'docker-credential-fake get registry.example.com',
      'docker-credential-store get https://index.docker.io/v1/',
      'docker-credential-store get other.example.com',
    ])
  })

  it('a helper that is not installed is an error that names it and the fix', () => {
    const config = DockerConfig.parse(JSON.stringify({credsStore: 'nonexistent-helper-xyz'}), '/home/me/.docker/config.json')
    let error: Error | undefined
    try {
      config.credentialsFor('registry.example.com')
    } catch (err) {
      error = err as Error
    }
    expect(error?.message).to.contain('docker-credential-nonexistent-helper-xyz is not on PATH')
    expect(error?.message).to.contain('/home/me/.docker/config.json')
  })
})
