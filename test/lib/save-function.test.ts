/**
 * fnr eval --save (src/lib/save-function.ts): the Kptfile entry kpt writes, and the Kptfile kept
 * as it was around it (comments, order, other fields). test/commands/eval-kpt-cli.test.ts compares
 * whole Kptfiles with kpt's.
 */
import {expect} from 'chai'

import {addToKptfile, checkSavedConfigPath, pipelineEntry} from '../../src/lib/save-function.js'
import {FnrError} from '../../src/lib/errors.js'

const KPTFILE = '# top\napiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: p # the name\npipeline:\n  mutators:\n  - image: foo:v1\n'

describe('fnr eval --save', () => {
  it('makes kpt\'s entry: image or exec, configMap (sorted, a kind argument left out) or configPath relative to the package, selectors, exclude', () => {
    expect(pipelineEntry('/p', {exec: './fn', fnConfigArgs: ['MyKind', 'z=1', 'a=2']})).to.deep.equal({exec: './fn', configMap: {a: '2', z: '1'}})
    expect(pipelineEntry('/p', {image: 'x:v1', fnConfigPath: '/p/cfg/fc.yaml', fnConfigArgs: []})).to.deep.equal({image: 'x:v1', configPath: 'cfg/fc.yaml'})
    expect(pipelineEntry('/p', {image: 'x:v1', fnConfigArgs: [], selector: {kind: 'ConfigMap', labels: {app: 'a'}}, exclude: {name: 'b'}})).to.deep.equal({
      image: 'x:v1',
      selectors: [{kind: 'ConfigMap', labels: {app: 'a'}}],
      exclude: [{name: 'b'}],
    })
    expect(Object.keys(pipelineEntry('/p', {exec: './fn', fnConfigArgs: [], selector: {}, exclude: {}}))).to.deep.equal(['exec'])
  })

  it('appends to the list --type names, or replaces the entry with the same image, keeping comments and order', () => {
    const added = addToKptfile(KPTFILE, '/p', {exec: './fn', fnConfigArgs: ['a=b']}, 'mutator')
    expect(added.message).to.equal('Added "./fn" as mutator in the Kptfile.\n')
    expect(added.text).to.equal('# top\napiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: p # the name\npipeline:\n  mutators:\n    - image: foo:v1\n    - exec: ./fn\n      configMap:\n        a: b\n')
    const updated = addToKptfile(added.text, '/p', {image: 'foo:v1', fnConfigArgs: ['n=1']}, 'mutator')
    expect(updated.message).to.equal('Updated "foo:v1" as mutator in the Kptfile.\n')
    expect(updated.text).to.contain('    - image: foo:v1\n      configMap:\n        "n": "1"\n    - exec: ./fn\n')
    // A key or value a YAML 1.1 reader takes for a bool or number is quoted, as kpt writes it.
    expect(addToKptfile(KPTFILE, '/p', {exec: './fn', fnConfigArgs: ['n=5', 'on=yes']}, 'mutator').text).to.contain('      configMap:\n        "n": "5"\n        "on": "yes"\n')
    const validator = addToKptfile('apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: p\n', '/p', {image: 'v:v1', fnConfigArgs: []}, 'validator')
    expect(validator.text).to.equal('apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: p\npipeline:\n  validators:\n    - image: v:v1\n')
  })

  it('refuses a --fn-config outside the package, in kpt\'s words', () => {
    expect(() => checkSavedConfigPath('/p', '/elsewhere/fc.yaml')).to.throw(FnrError, '--fn-config must be under /p if saving functions to Kptfile (--save=true)')
    expect(() => checkSavedConfigPath('/p', '/p/fc.yaml')).not.to.throw()
    expect(() => checkSavedConfigPath('/p', undefined)).not.to.throw()
  })
})
