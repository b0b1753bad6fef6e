/**
 * Where the porch-server suite reads Porch's own files, as written (never copied into the repo):
 * - Porch v1.5.8's CRDs (Repository, and the internal PackageRev its CR cache keeps), its namespace and its APIService
 *   from ../shared/compat/porch/v1.5.8/ (the files named as in that folder's README: `porch_N-…` for deployments/porch,
 *   the CRDs under their own names);
 * - Porch's test blueprints (`test/pkgs/test-pkgs/test-blueprints.bundle`, a git bundle holding bucket/v1) from Porch's
 *   module in the Go module cache, which the porch-server build downloads.
 * FNR_PORCH_FILES=module reads the CRDs and the APIService from that module too (their paths in Porch's tree).
 */
import {execFileSync} from 'node:child_process'
import {existsSync} from 'node:fs'
import path from 'node:path'

import {PORCH_COMPAT} from '../catalog/support.js'

export interface PorchServerFiles {
  namespace: string
  repositoriesCrd: string
  packagerevsCrd: string
  apiService: string
  blueprintsBundle: string
}

export const PORCH_VERSION = 'v1.5.8'
export const COMPAT_DIR = path.join(PORCH_COMPAT, PORCH_VERSION)

/** Porch's module folder in the Go module cache. */
export function porchModuleDir(): string {
  const cache = execFileSync('go', ['env', 'GOMODCACHE'], {encoding: 'utf8'}).trim()
  return path.join(cache, 'github.com', 'nephio-project', `porch@${PORCH_VERSION}`)
}

/** The files, or an Error of one line naming the folder (and files) that are missing. */
export function porchServerFiles(source = process.env.FNR_PORCH_FILES): PorchServerFiles {
  const mod = porchModuleDir()
  const blueprintsBundle = path.join(mod, 'test', 'pkgs', 'test-pkgs', 'test-blueprints.bundle')
  const files: PorchServerFiles = source === 'module'
    ? {
        namespace: path.join(mod, 'deployments', 'porch', '1-namespace.yaml'),
        repositoriesCrd: path.join(mod, 'api', 'porchconfig', 'v1alpha1', 'config.porch.kpt.dev_repositories.yaml'),
        packagerevsCrd: path.join(mod, 'internal', 'api', 'porchinternal', 'v1alpha1', 'config.porch.kpt.dev_packagerevs.yaml'),
        apiService: path.join(mod, 'deployments', 'porch', '4-apiservice.yaml'),
        blueprintsBundle,
      }
    : {
        namespace: path.join(COMPAT_DIR, 'porch_1-namespace.yaml'),
        repositoriesCrd: path.join(COMPAT_DIR, 'config.porch.kpt.dev_repositories.yaml'),
        packagerevsCrd: path.join(COMPAT_DIR, 'config.porch.kpt.dev_packagerevs.yaml'),
        apiService: path.join(COMPAT_DIR, 'porch_4-apiservice.yaml'),
        blueprintsBundle,
      }
  const missing = Object.values(files).filter((f) => !existsSync(f))
  if (missing.length > 0) {
    const dirs = [...new Set(missing.map((f) => path.dirname(f)))]
    throw new Error(`Porch ${PORCH_VERSION}'s files for porch-server are missing: ${missing.map((f) => path.basename(f)).join(', ')} not in ${dirs.join(', ')}`)
  }
  return files
}
