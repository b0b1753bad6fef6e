/**
 * The Kptfile reader (src/lib/kptfile.ts): kpt's strict decode and pipeline validation, with
 * kpt's messages (each one taken from kpt 1.0.0-beta.56's output on the same Kptfile; the
 * end-to-end spec test/commands/render-kptfile.test.ts runs them through kpt itself).
 */
import {expect} from 'chai'
import {errorLine, FnrError} from '../../src/lib/errors.js'
import {decodeKptfile, imageNameError, readKptfile, validatePipeline, type Kptfile} from '../../src/lib/kptfile.js'
import {containerStderr, kptfileConfigMap} from '../../src/lib/resourcelist/index.js'
import {stringifyNode} from '../../src/lib/resourcelist/yaml.js'

const PKG = '/work/pkg'
const HEAD = 'apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: p\n'

function thrown(fn: () => unknown): FnrError {
  try {
    fn()
  } catch (err) {
    expect(err).to.be.instanceOf(FnrError)
    expect((err as FnrError).kind).to.equal('InvalidPackage')
    return err as FnrError
  }
  throw new Error('expected an error')
}

/**
 * kpt's text for go-yaml's errors, then fnr's field paths: each line is written here as
 * `line N: message (at path)`.
 */
function unmarshal(...lines: string[]): string {
  const errors = lines.map((l) => l.replace(/ \(at [^)]*\)$/, ''))
  const paths = lines.flatMap((l) => {
    const m = /^(line \d+): .* \(at ([^)]*)\)$/.exec(l)
    return m ? [`${m[1]}: ${m[2]}`] : []
  })
  return `Error: Kptfile at "${PKG}" can't be read.\n\nDetails:\nyaml: unmarshal errors:\n  ${errors.join('\n  ')}${paths.length > 0 ? `\n\nField paths:\n  ${paths.join('\n  ')}` : ''}`
}

/** A package whose files are this map (path relative to PKG -> text). */
const files =
  (tree: Record<string, string>) =>
  (abs: string): string | undefined =>
    tree[abs.slice(PKG.length + 1)]

describe('Kptfile (kpt\'s decode and validation)', () => {
  describe('the strict decode', () => {
    it('keeps every scalar\'s source text in configMap, in the Kptfile\'s order; null is ""', () => {
      const kf = decodeKptfile(
        `${HEAD}pipeline:\n  mutators:\n  - image: set-namespace\n    configMap:\n      n: 3\n      b: true\n      f: 1.50\n      h: 0x1F\n      z:\n      t: ~\n      q: "quoted"\n      5: five\n      y: yes\n`,
        PKG,
      )
      expect(kf.pipeline.mutators[0]!.configMap).to.deep.equal([
        ['n', '3'],
        ['b', 'true'],
        ['f', '1.50'],
        ['h', '0x1F'],
        ['z', ''],
        ['t', ''],
        ['q', 'quoted'],
        ['5', 'five'],
        ['y', 'yes'],
      ])
    })

    it('accepts every field of kpt\'s schema, null sections, `configMap: {}`, and drops null list items as go-yaml does', () => {
      const kf = decodeKptfile(
        `${HEAD}  namespace: ns\n  labels: {a: b}\n  annotations: {c: d}\nupstream:\n  type: git\n  git: {repo: r, directory: d, ref: x}\n  updateStrategy: resource-merge\nupstreamLock:\n  type: git\n  git: {repo: r, directory: d, ref: x, commit: abc}\ninfo:\n  site: s\n  emails: [a@b, ~]\n  license: MIT\n  licenseFile: L\n  description: d\n  keywords: [k]\n  man: m\n  readinessGates: [{conditionType: c}]\ninventory: {namespace: n, name: x, inventoryID: i, labels: {a: b}, annotations: {c: d}}\nstatus:\n  conditions: [{type: t, status: "True", reason: r, message: m}]\npipeline:\n  mutators:\n  - exec: ./fn\n    name: x\n    configMap: {}\n    selectors: [{apiVersion: v1, kind: ConfigMap, name: cm, namespace: ns, labels: {app: 3}, annotations: {}}]\n    exclude: [{kind: Foo}]\n  -\n  validators:\n`,
        PKG,
      )
      expect(kf.pipeline.mutators).to.have.length(1)
      const f = kf.pipeline.mutators[0]!
      expect(f).to.deep.include({exec: './fn', image: '', name: 'x', configMap: [], configPath: ''})
      expect(f.selectors).to.deep.equal([{apiVersion: 'v1', kind: 'ConfigMap', name: 'cm', namespace: 'ns', labels: {app: '3'}, annotations: {}}])
      expect(f.exclude).to.deep.equal([{kind: 'Foo'}])
      expect(kf.pipeline.validators).to.deep.equal([])
      expect(decodeKptfile(`${HEAD}pipeline:\n`, PKG).pipeline).to.deep.equal({mutators: [], validators: []})
    })

    it('refuses a map or a list as a configMap value (no "[object Object]" ever reaches a function)', () => {
      const e = thrown(() => decodeKptfile(`${HEAD}pipeline:\n  mutators:\n  - image: set-namespace\n    configMap:\n      namespace: {hello: world}\n      envs:\n      - dev\n`, PKG))
      expect(e.message).to.equal(
        unmarshal(
          'line 9: cannot unmarshal !!map into string (at pipeline.mutators[0].configMap.namespace)',
          'line 11: cannot unmarshal !!seq into string (at pipeline.mutators[0].configMap.envs)',
        ),
      )
      expect(e.message.endsWith(' string\n\nField paths:\n  line 9: pipeline.mutators[0].configMap.namespace\n  line 11: pipeline.mutators[0].configMap.envs')).to.equal(true)
      expect(e.exitCode).to.equal(1)
      // kpt's CLI ends its message with " \n"; no "fnr:" prefix.
      expect(errorLine(e)).to.equal(`${e.message} \n`)
    })

    it('refuses unknown fields at every level, all reported at once in document order', () => {
      const e = thrown(() =>
        decodeKptfile(
          `${HEAD}  uid: 3\npipeline:\n  mutators:\n  - image: set-labels\n    configMap:\n      tier: backend\n    targetResources:\n    - kind: Deployment\n    selectors:\n    - kind: [x]\n      foo: 1\n  bar: 1\nzz: 2\n`,
          PKG,
        ),
      )
      expect(e.message).to.equal(
        unmarshal(
          'line 5: field uid not found in type yaml.ObjectMeta (at metadata.uid)',
          'line 11: field targetResources not found in type v1.Function (at pipeline.mutators[0].targetResources)',
          'line 14: cannot unmarshal !!seq into string (at pipeline.mutators[0].selectors[0].kind)',
          'line 15: field foo not found in type v1.Selector (at pipeline.mutators[0].selectors[0].foo)',
          'line 16: field bar not found in type v1.Pipeline (at pipeline.bar)',
          'line 17: field zz not found in type v1.KptFile (at zz)',
        ),
      )
    })

    it('names the YAML type and a shortened value where a map or list is expected', () => {
      expect(thrown(() => decodeKptfile(`${HEAD}pipeline:\n  mutators:\n  - exec: x\n    configMap: foo-bar-baz-qux\n`, PKG)).message).to.equal(
        unmarshal('line 8: cannot unmarshal !!str `foo-bar...` into map[string]string (at pipeline.mutators[0].configMap)'),
      )
      expect(thrown(() => decodeKptfile(`${HEAD}pipeline:\n  mutators: [3, x, 1.5, true]\n`, PKG)).message).to.equal(
        unmarshal(
          'line 6: cannot unmarshal !!int `3` into v1.Function (at pipeline.mutators[0])',
          'line 6: cannot unmarshal !!str `x` into v1.Function (at pipeline.mutators[1])',
          'line 6: cannot unmarshal !!float `1.5` into v1.Function (at pipeline.mutators[2])',
          'line 6: cannot unmarshal !!bool `true` into v1.Function (at pipeline.mutators[3])',
        ),
      )
      expect(thrown(() => decodeKptfile(`${HEAD}pipeline:\n  mutators: {a: b}\n`, PKG)).message).to.equal(unmarshal('line 6: cannot unmarshal !!map into []v1.Function (at pipeline.mutators)'))
      expect(thrown(() => decodeKptfile(`${HEAD}pipeline: foo\n`, PKG)).message).to.equal(unmarshal('line 5: cannot unmarshal !!str `foo` into v1.Pipeline (at pipeline)'))
      expect(thrown(() => decodeKptfile(`${HEAD}upstream:\n  type: [git]\n`, PKG)).message).to.equal(unmarshal('line 6: cannot unmarshal !!seq into v1.OriginType (at upstream.type)'))
    })

    it('refuses a repeated key as go-yaml does', () => {
      expect(thrown(() => decodeKptfile(`${HEAD}pipeline:\n  mutators:\n  - exec: a\n    exec: b\n`, PKG)).message).to.equal(unmarshal('line 8: mapping key "exec" already defined at line 7'))
    })

    it('checks the apiVersion and kind first, with kpt\'s messages', () => {
      const body = 'metadata:\n  name: p\n'
      expect(thrown(() => decodeKptfile(`apiVersion: kpt.dev/v1alpha2\nkind: Kptfile\n${body}`, PKG)).message).to.equal(
        `Error: Kptfile at "${PKG}" has an old version ("v1alpha2") of the Kptfile schema.\nPlease run "kpt fn eval <PKG_PATH> -i gcr.io/kpt-fn/fix:v0.2 --include-meta-resources" to upgrade the package and retry.`,
      )
      expect(thrown(() => decodeKptfile(`apiVersion: kpt.dev/v1alpha1\nkind: Kptfile\n${body}`, PKG)).message).to.match(/old version \("v1alpha1"\).*\nPlease update the package to the latest format/)
      expect(thrown(() => decodeKptfile(`apiVersion: kpt.dev/v2\nkind: Kptfile\n${body}`, PKG)).message).to.equal(`Error: Kptfile at "${PKG}" has an unknown resource type ("kpt.dev/v2, Kind=Kptfile").`)
      expect(thrown(() => decodeKptfile(`apiVersion: v1\nkind: Kptfile\n${body}`, PKG)).message).to.contain('("/v1, Kind=Kptfile")')
      expect(thrown(() => decodeKptfile(`kind: Kptfile\n${body}`, PKG)).message).to.contain('("/, Kind=Kptfile")')
      expect(thrown(() => decodeKptfile(`apiVersion: kpt.dev/v1\nkind: Foo\n${body}`, PKG)).message).to.contain('("kpt.dev/v1, Kind=Foo")')
      expect(thrown(() => decodeKptfile(`apiVersion: a/b/c\nkind: Kptfile\n${body}`, PKG)).message).to.equal(`Error: Kptfile at "${PKG}" can't be read.\n\nDetails:\nunexpected GroupVersion string: a/b/c`)
      expect(thrown(() => decodeKptfile('', PKG)).message).to.equal(`Error: Kptfile at "${PKG}" can't be read.\n\nDetails:\nEOF`)
      expect(thrown(() => decodeKptfile('# only a comment\n', PKG)).message).to.match(/\nEOF$/)
      expect(thrown(() => decodeKptfile('- a\n', PKG)).message).to.match(/\nmissing Resource metadata$/)
      // kpt's invalid-kptfile e2e case: go-yaml's words for a key that runs over several lines.
      expect(thrown(() => decodeKptfile('apiVersion: kpt.dev/v1\nkslsls\n;s;s;s\n', PKG)).message).to.equal(`Error: Kptfile at "${PKG}" can't be read.\n\nDetails:\nyaml: line 2: could not find expected ':'`)
    })
  })

  describe('the pipeline validation', () => {
    const kf = (fn: Partial<Kptfile['pipeline']['mutators'][0]>, key: 'mutators' | 'validators' = 'mutators'): Kptfile => {
      const f = {image: '', exec: '', configPath: '', configMap: [], name: '', selectors: [], exclude: [], ...fn}
      return {apiVersion: 'kpt.dev/v1', kind: 'Kptfile', name: 'p', pipeline: {mutators: [], validators: [], [key]: [f]}}
    }
    const invalid = (field: string, reason: string, value?: string): string => `Kptfile is invalid:\nField: \`${field}\`\n${value === undefined ? '' : `Value: ${JSON.stringify(value)}\n`}Reason: ${reason}\n`
    const one = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n'
    const read = files({'fc.yaml': one, 'two.yaml': `${one}---\n${one}`, 'noname.yaml': 'apiVersion: v1\nkind: ConfigMap\n', 'plain.yaml': 'a: b\n', 'empty.yaml': '', 'bad.yaml': 'a: [\n', 'kustomization.yaml': 'resources: []\n'})
    const check = (k: Kptfile): string => thrown(() => validatePipeline(k, PKG, read)).message

    it('needs exactly one of image and exec (kpt\'s wording, its "functon" included)', () => {
      expect(check(kf({}, 'validators'))).to.equal(invalid('pipeline.validators[0]', 'must specify a functon (`image` or `exec`) to execute'))
      expect(check(kf({image: 'x', exec: 'y'}))).to.equal(invalid('pipeline.mutators[0]', 'must not specify both `image` and `exec` at the same time'))
    })

    it('checks the image name as kpt does', () => {
      expect(check(kf({image: 'Foo/Bar:v1'}))).to.equal(invalid('pipeline.mutators[0].image', 'function name "Foo/Bar:v1" is invalid', 'Foo/Bar:v1'))
      for (const ok of ['set-labels', 'gcr.io/kpt-fn/set-namespace:v0.4.1', 'ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.2', 'fnr.local/set-namespace:v0.4', `localhost:5000/a/b@sha256:${'a'.repeat(64)}`, 'a__b', 'a--b', 'UPPER.io/x']) {
        expect(imageNameError(ok), ok).to.equal(undefined)
      }
      for (const bad of ['a:b:c', 'a___b', 'a-.b', 'x/', 'a'.repeat(3000) + '!']) expect(imageNameError(bad), bad).to.be.a('string')
    })

    it('refuses configMap with configPath, and bad configPaths, with kpt\'s reasons', () => {
      expect(check(kf({exec: 'x', configPath: 'fc.yaml', configMap: [['a', 'b']]}))).to.equal(invalid('pipeline.mutators[0]', 'functionConfig must not specify both `configMap` and `configPath` at the same time'))
      const path = (p: string): string => check(kf({exec: 'x', configPath: p}))
      expect(path('/etc/passwd')).to.equal(invalid('pipeline.mutators[0].configPath', 'path must be relative', '/etc/passwd'))
      expect(path('a/../../x.yaml')).to.equal(invalid('pipeline.mutators[0].configPath', 'path must not be outside the package', 'a/../../x.yaml'))
      expect(path('a..b.yaml')).to.contain('Reason: path must not be outside the package')
      expect(path('  ')).to.equal(invalid('pipeline.mutators[0].configPath', 'path must not be empty', '  '))
      expect(path('nothere.yaml')).to.equal(invalid('pipeline.mutators[0].configPath', 'functionConfig must exist in the current package', 'nothere.yaml'))
      expect(path('two.yaml')).to.equal(invalid('pipeline.mutators[0].configPath', 'functionConfig "two.yaml" must not contain more than one config, got 2', 'two.yaml'))
      expect(path('noname.yaml')).to.contain('Reason: functionConfig "noname.yaml": resource must have `metadata.name`')
      expect(path('plain.yaml')).to.contain('Reason: functionConfig "plain.yaml": resource must have `apiVersion`')
      expect(path('bad.yaml')).to.contain('Reason: failed to read functionConfig "bad.yaml": ')
      // kpt panics (index out of range) on a file without documents; fnr refuses it.
      expect(path('empty.yaml')).to.contain('Reason: functionConfig "empty.yaml" must contain one config, got 0')
    })

    it('accepts a one-resource configPath (./ included) and an empty configMap beside it, as kpt does', () => {
      validatePipeline(kf({exec: 'x', configPath: './fc.yaml', configMap: []}), PKG, read)
      validatePipeline(kf({image: 'set-labels', configPath: 'kustomization.yaml'}), PKG, read)
      const text = `${HEAD}pipeline:\n  mutators:\n  - image: set-labels\n    configPath: fc.yaml\n    configMap: {}\n`
      expect(readKptfile(text, PKG, read).pipeline.mutators[0]!.configPath).to.equal('fc.yaml')
    })
  })

  it('builds render\'s ConfigMap as kpt does: values quoted only when they would read back as something else, keys plain', () => {
    const cm = kptfileConfigMap([['5', 'five'], ['y', 'yes'], ['n', '3'], ['e', ''], ['b', 'true']])
    expect(stringifyNode(cm)).to.equal('apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: function-input\ndata: {5: five, y: yes, n: "3", e: "", b: "true"}\n')
  })

  it('keeps an image function\'s stderr as kpt reads it from the container runtime: line by line, no final newline', () => {
    expect(containerStderr('')).to.equal('')
    expect(containerStderr('one\ntwo\n')).to.equal('one\ntwo')
    expect(containerStderr('one\r\ntwo')).to.equal('one\ntwo')
    expect(containerStderr('one\n\n')).to.equal('one\n')
  })
})
