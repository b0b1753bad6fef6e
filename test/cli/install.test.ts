/**
 * The install a user does: `npm pack` the built project, `npm i -g` the tarball into a prefix
 * (--prefer-offline: what `npm ci` left in npm's cache is used, and the registry is asked only for
 * the rest: `npm ci` caches the tarballs of the lock file, not every package's metadata, so a
 * strict --offline install fails with ENOTCACHED on a machine whose cache was empty before), then
 * the installed `fnr` runs: --version, --help, one eval of a shipped function (the fast path's
 * bundle is in the tarball) and shell completion.
 */
import {expect} from 'chai'
import {execa} from 'execa'
import {readFile, readdir, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {REPO_ROOT} from '../support/serve.js'
import {TempDirs} from '../support/tmp.js'

describe('install: npm pack, then npm i -g of the tarball', function () {
  this.timeout(180_000)
  const temp = new TempDirs()
  after(() => temp.cleanup())

  it('installs from the packed tarball and the installed fnr runs --version, --help, eval of a shipped function and autocomplete', async () => {
    const dir = await temp.make('fnr-install-')
    const {version} = JSON.parse(await readFile(path.join(REPO_ROOT, 'package.json'), 'utf8')) as {version: string}
    // --ignore-scripts: the project has no pack scripts; a future one must not run here unseen.
    await execa('npm', ['pack', '--pack-destination', dir, '--ignore-scripts', '--silent'], {cwd: REPO_ROOT})
    const tarball = path.join(dir, `fnr-${version}.tgz`)
    expect(await readdir(dir)).to.deep.equal([path.basename(tarball)])

    const prefix = path.join(dir, 'prefix')
    const npm = await execa('npm', ['i', '-g', '--prefix', prefix, '--prefer-offline', '--no-audit', '--no-fund', tarball], {cwd: dir, reject: false})
    expect(npm.exitCode, `${npm.stdout}\n${npm.stderr}`).to.equal(0)

    const fnr = path.join(prefix, 'bin', 'fnr')
    // A home of its own: completion writes its cache there.
    const env = {HOME: dir, XDG_CACHE_HOME: path.join(dir, 'cache'), NO_COLOR: '1'}
    const run = (args: string[], input?: string) => execa(fnr, args, {cwd: dir, env, reject: false, ...(input === undefined ? {} : {input})})

    const v = await run(['--version'])
    expect(v.exitCode, v.stderr).to.equal(0)
    expect(v.stdout).to.match(new RegExp(`^fnr/${version.replace(/\./g, '\\.')} `))

    const help = await run(['--help'])
    expect(help.exitCode, help.stderr).to.equal(0)
    for (const command of ['eval', 'render', 'test', 'serve', 'autocomplete']) expect(help.stdout, command).to.match(new RegExp(`^  ${command} `, 'm'))

    const file = path.join(dir, 'cm.yaml')
    await writeFile(file, 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n')
    const e = await run(['eval', '--input', file, '--image', 'fnr.local/set-namespace:v0.4', '-o', 'unwrap', '--', 'namespace=prod'])
    expect(e.exitCode, e.stderr).to.equal(0)
    expect(e.stdout).to.match(/^ {2}namespace: prod$/m)
    expect(e.stderr).to.contain('[PASS] "fnr.local/set-namespace:v0.4"')

    const ac = await run(['autocomplete', 'bash'])
    expect(ac.exitCode, ac.stderr).to.equal(0)
    expect(ac.stdout).to.contain('fnr autocomplete script bash')
  })
})
