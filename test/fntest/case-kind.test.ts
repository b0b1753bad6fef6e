/**
 * Whether an `fnr test` case renders its package or evaluates one function
 * (src/lib/fntest/run.ts isRenderCase): config.yaml's testType decides; without it a package case
 * that names no function (on the command line or in config.yaml) renders, and every other case
 * evaluates.
 */
import {expect} from 'chai'

import type {TestCase} from '../../src/lib/fntest/discover.js'
import {isRenderCase} from '../../src/lib/fntest/run.js'

function testCase(mode: TestCase['mode'], config: Partial<TestCase['config']> = {}): TestCase {
  return {name: 'c', dir: '/c', expectedDir: '/c/.expected', mode, config: {exitCode: 0, disableOutputTruncate: false, skip: false, sequential: false, debug: false, warnings: [], ...config}, scripts: {}, outOfPlace: false}
}

describe('fnr test: render or eval', () => {
  it('testType in config.yaml decides, whatever else is given', () => {
    expect(isRenderCase(testCase('package', {testType: 'render', image: 'x:v1'}), {image: 'y:v1'})).to.equal(true)
    expect(isRenderCase(testCase('package', {testType: 'eval'}), {})).to.equal(false)
    expect(isRenderCase(testCase('resourcelist', {testType: 'render'}), {})).to.equal(true)
  })

  it('without testType: a package case naming no function renders', () => {
    expect(isRenderCase(testCase('package'), {})).to.equal(true)
    expect(isRenderCase(testCase('resourcelist'), {})).to.equal(false)
  })

  it('without testType: a function named on the command line or in config.yaml makes it an eval', () => {
    expect(isRenderCase(testCase('package'), {exec: './fn'})).to.equal(false)
    expect(isRenderCase(testCase('package'), {image: 'x:v1'})).to.equal(false)
    expect(isRenderCase(testCase('package', {image: 'x:v1'}), {})).to.equal(false)
    expect(isRenderCase(testCase('package', {execPath: 'fn.sh'}), {})).to.equal(false)
  })
})
