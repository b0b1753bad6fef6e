/** manifests/ of the repository and the shape of the Kubernetes objects in it. */
import path from 'node:path'

import {REPO_ROOT} from './serve.js'

export const MANIFESTS = path.join(REPO_ROOT, 'manifests')

export interface K8sObject {
  apiVersion: string
  kind: string
  metadata: {name: string; namespace?: string}
  [key: string]: unknown
}
