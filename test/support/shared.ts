/**
 * The peers' own files the tests read in place from ../shared, beside the checkout (Porch's files,
 * the catalog's examples; never copied into the repository). In a checkout without that folder the
 * suites that need it fail with one line naming what is missing, not with ENOENT deep in a test.
 */
import {existsSync} from 'node:fs'
import path from 'node:path'

import {REPO_ROOT} from './serve.js'

export const SHARED = path.join(REPO_ROOT, '..', 'shared')

/** `../shared/<rel>`, or an error that names it when it is absent. */
export function requireShared(rel: string): string {
  const p = path.join(SHARED, rel)
  if (!existsSync(p)) throw new Error(`../shared/${rel} is absent (looked for ${p}): this suite reads the peers' own files from the shared folder beside the checkout (docs/contributing.md)`)
  return p
}
