/** Writing a ResourceList to a directory (src/lib/resourcelist/sink.ts), in process: comments, path safety, in place; compared with kpt fn sink in ./sink.test.ts. */
import {readFileSync, symlinkSync, writeFileSync, existsSync, lstatSync} from 'node:fs'
import {join} from 'node:path'

import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import {parseResourceList, readPackage, sinkToDirectory, sourcePathsOf, writePackage} from '../../src/lib/resourcelist/index.js'
import {PACKAGES, readTree, Scratch} from './helpers.js'

async function sinkError(input: string, dir: string): Promise<FnrError> {
  const e = await sinkToDirectory(input, dir).catch((x: unknown) => x)
  expect(e).to.be.instanceOf(FnrError)
  return e as FnrError
}

const RL = (items: string) => `apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n${items}`

const item = (path: string, name = 'x') =>
  `- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: ${name}\n    annotations:\n      internal.config.kubernetes.io/path: '${path}'\n`

describe('resourcelist sink', () => {
  const scratch = new Scratch()
  after(() => scratch.cleanup())

  describe('interop with kpt fn sink', () => {
    it('keeps a comment after the last field of a resource (kpt drops it when another item follows)', async () => {
      const input = RL(
        '- apiVersion: v1\n  kind: A\n  metadata:\n    name: a\n    annotations:\n      internal.config.kubernetes.io/path: a.yaml\n  # trailing\n' +
          item('b.yaml', 'b'),
      )
      const got = scratch.path('fnr-out')
      await sinkToDirectory(input, got)
      expect(readTree(got)['a.yaml']).to.equal('apiVersion: v1\nkind: A\nmetadata:\n  name: a\n# trailing\n')
    })
  })

  describe('safety', () => {
    it('never writes outside the directory', async () => {
      for (const p of ['../evil.yaml', 'a/../../evil.yaml', '/etc/evil.yaml', '..']) {
        const dir = scratch.path('out')
        const e = await sinkError(RL(item(p)), dir)
        expect(e.message).to.match(/outside of package|cannot be a directory/)
        expect(existsSync(dir)).to.equal(false)
      }
      expect(existsSync(join(scratch.root, 'evil.yaml'))).to.equal(false)
    })

    it('rejects paths naming a directory and duplicate path+index', async () => {
      let e = await sinkError(RL(item('sub/')), scratch.path('out'))
      expect(e.message).to.equal('config.kubernetes.io/path cannot be a directory: sub/')
      e = await sinkError(RL(item('a.yaml') + item('a.yaml/b.yaml', 'y')), scratch.path('out'))
      expect(e.message).to.equal('config.kubernetes.io/path cannot be a directory: a.yaml')
      const dup = `- apiVersion: v1\n  kind: A\n  metadata:\n    name: a\n    annotations:\n      internal.config.kubernetes.io/path: a.yaml\n      internal.config.kubernetes.io/index: '0'\n`
      e = await sinkError(RL(dup + dup), scratch.path('out'))
      expect(e.message).to.equal('resource at path "a.yaml" and index "0" already exists')
    })

    it('cleans paths (./a/../b.yaml is b.yaml)', async () => {
      const dir = scratch.path('out')
      await sinkToDirectory(RL(item('./a/../b.yaml')), dir)
      expect(Object.keys(readTree(dir))).to.deep.equal(['b.yaml'])
    })

    it('does not write through symbolic links in place', async () => {
      const outside = scratch.tree({'victim.yaml': 'original\n'}, 'outside')
      const dir = scratch.tree({'keep.yaml': 'apiVersion: v1\nkind: A\nmetadata:\n  name: k\n'})
      symlinkSync(join(outside, 'victim.yaml'), join(dir, 'link.yaml'))
      symlinkSync(outside, join(dir, 'linkdir'))
      let e = (await writePackage(parseResourceList(RL(item('link.yaml'))).items, dir).catch((x: unknown) => x)) as FnrError
      expect(e.message).to.equal('refusing to write link.yaml: it is a symbolic link')
      e = (await writePackage(parseResourceList(RL(item('linkdir/new.yaml'))).items, dir).catch((x: unknown) => x)) as FnrError
      expect(e.message).to.equal('refusing to write linkdir/new.yaml: linkdir is a symbolic link')
      expect(readFileSync(join(outside, 'victim.yaml'), 'utf8')).to.equal('original\n')
      expect(existsSync(join(outside, 'new.yaml'))).to.equal(false)
    })

    it('leaves a symlinked file alone when its content does not change', async () => {
      const dir = scratch.tree({'target/t.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: t\n', 'link.yaml': '->target/t.yaml'})
      const list = await readPackage([dir])
      const report = await writePackage(list.items, dir, {previousPaths: sourcePathsOf(list.items)})
      expect(report.unchanged).to.deep.equal(['link.yaml', 'target/t.yaml'])
      expect(lstatSync(join(dir, 'link.yaml')).isSymbolicLink()).to.equal(true)
    })
  })

  describe('in place (writePackage)', () => {
    it('rewrites changed files, deletes emptied ones, keeps other files', async () => {
      const dir = scratch.tree({...PACKAGES.basic!, 'README.md': 'docs\n', 'empty.yaml': ''})
      const list = await readPackage([dir])
      const previous = sourcePathsOf(list.items)
      // drop the ConfigMap, change the Service
      const items = list.items.filter((i) => String(i.getIn(['kind'])) !== 'ConfigMap')
      items[2]!.setIn(['metadata', 'labels'], parseResourceList('a: b\n').items[0]!)
      const report = await writePackage(items, dir, {previousPaths: previous})
      expect(report).to.deep.equal({written: ['deploy.yaml'], unchanged: ['Kptfile'], deleted: ['sub/cm.yaml']})
      const files = readTree(dir)
      expect(Object.keys(files)).to.deep.equal(['Kptfile', 'README.md', 'deploy.yaml', 'empty.yaml'])
      expect(files['deploy.yaml']).to.include('# svc comment\napiVersion: v1\nkind: Service\nmetadata:\n  name: web-svc\n  labels:\n    a: b\n')
      expect(files['deploy.yaml']).to.include('      containers:\n        - name: a\n') // wide list kept
    })

    it('gives new resources the next free index in an existing file', async () => {
      const dir = scratch.tree(PACKAGES.basic!)
      const list = await readPackage([dir])
      const extra = parseResourceList(RL(item('deploy.yaml', 'extra'))).items[0]!
      await writePackage([...list.items, extra], dir, {previousPaths: sourcePathsOf(list.items)})
      const docs = readFileSync(join(dir, 'deploy.yaml'), 'utf8').split('---\n')
      expect(docs).to.have.length(3)
      expect(docs[2]).to.include('name: extra')
    })

    it('writes several new files into one new directory, and deeper ones under it (ensure-name-substring moves a whole package there)', async () => {
      const dir = scratch.tree(PACKAGES.basic!)
      const list = await readPackage([dir])
      const moved = parseResourceList(RL([item('ns/a.yaml', 'a'), item('ns/b.yaml', 'b'), item('ns/deeper/c.yaml', 'c'), item('ns/deeper/d.yaml', 'd')].join(''))).items
      const report = await writePackage([...list.items, ...moved], dir, {previousPaths: sourcePathsOf(list.items)})
      expect(report.written).to.deep.equal(['ns/a.yaml', 'ns/b.yaml', 'ns/deeper/c.yaml', 'ns/deeper/d.yaml'])
      const files = readTree(dir)
      for (const [f, name] of [['ns/a.yaml', 'a'], ['ns/b.yaml', 'b'], ['ns/deeper/c.yaml', 'c'], ['ns/deeper/d.yaml', 'd']]) expect(files[f!], f).to.include(`name: ${name}\n`)
    })

    it('requires an existing directory', async () => {
      const e = (await writePackage([], scratch.path('nope')).catch((x: unknown) => x)) as FnrError
      expect(e).to.be.instanceOf(FnrError)
      writeFileSync(join(scratch.root, 'afile'), 'x')
      const e2 = (await writePackage([], join(scratch.root, 'afile')).catch((x: unknown) => x)) as FnrError
      expect(e2.message).to.match(/not a directory/)
    })
  })
})
