/**
 * Porch's own files, read from ../shared/compat/porch (never copied into the repository), and the
 * stand-ins for the catalog binaries Porch's image ships: shared by test/config/porch-files.test.ts
 * and test/config/porch-files-unit.test.ts.
 */
import {mkdir, readFile} from 'node:fs/promises'
import path from 'node:path'

import {parseAllDocuments} from 'yaml'

import {expect} from 'chai'

import type {FunctionConfigObject} from '../../src/lib/config/function-config-crd.js'
import type {KubeObject} from './k8s/status.js'
import {REPO_ROOT} from './serve.js'
import {requireShared} from './shared.js'
import {TempDirs, writeExecutable} from './tmp.js'

const PORCH = path.join(REPO_ROOT, '..', 'shared', 'compat', 'porch')

export const CATALOG = 'ghcr.io/kptdev/krm-functions-catalog'

/** The objects of one of Porch's files (`file` relative to ../shared/compat/porch). */
export async function porchDocs(file: string): Promise<KubeObject[]> {
  return parseAllDocuments(await readFile(path.join(PORCH, file), 'utf8'))
    .map((d) => d.toJS() as KubeObject)
    .filter((d) => d && typeof d === 'object')
}

/** The catalog binaries Porch's image ships (stand-ins: each prints its name on stderr and passes its input through). */
export const CATALOG_BINARIES = ['apply-setters', 'ensure-name-substring', 'search-replace', 'set-annotations', 'set-image', 'set-labels', 'set-namespace', 'set-project-id', 'starlark', 'upsert-resource', 'apply-replacements']

/**
 * HEAD's 19 FunctionConfigs (asserted), and a functions directory, in a new temp dir of `temp`,
 * holding a stand-in for each of CATALOG_BINARIES.
 */
export async function headFunctionConfigs(temp: TempDirs): Promise<{objects: FunctionConfigObject[]; functionsDir: string}> {
  const objects = (await porchDocs('head/porch_23-function-configurations.yaml')).filter((d) => d.kind === 'FunctionConfig') as FunctionConfigObject[]
  expect(objects).to.have.length(19)
  const functionsDir = path.join(await temp.make('fnr-porch-fc-'), 'functions')
  await mkdir(functionsDir)
  for (const name of CATALOG_BINARIES) await writeExecutable(path.join(functionsDir, name), `#!/bin/sh\necho "${name}" >&2\nexec cat\n`)
  return {objects, functionsDir}
}

/** The set-up of a suite on Porch's files: fails without ../shared/compat/porch; returns temp dirs removed after the suite. */
export function porchFilesSuite(): TempDirs {
  before(() => requireShared('compat/porch'))
  const temp = new TempDirs()
  after(() => temp.cleanup())
  return temp
}
