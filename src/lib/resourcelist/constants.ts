/**
 * Names shared by the ResourceList modules: the wrapper's GVK and the annotations an orchestrator
 * sets, keeps and strips (kpt's `config.kubernetes.io/*` and `internal.config.kubernetes.io/*`).
 */

export const RESOURCE_LIST_API_VERSION = 'config.kubernetes.io/v1'
export const RESOURCE_LIST_KIND = 'ResourceList'

/** Annotation keys. "legacy" ones are the deprecated copies kpt still sends next to the internal ones. */
export const A = {
  path: 'internal.config.kubernetes.io/path',
  index: 'internal.config.kubernetes.io/index',
  id: 'internal.config.kubernetes.io/id',
  seqIndent: 'internal.config.kubernetes.io/seqindent',
  migrationId: 'internal.config.kubernetes.io/annotations-migration-resource-id',
  packagePath: 'internal.config.kubernetes.io/package-path',
  legacyPath: 'config.kubernetes.io/path',
  legacyIndex: 'config.kubernetes.io/index',
  legacyId: 'config.k8s.io/id',
  kptResourceId: 'internal.config.k8s.io/kpt-resource-id',
} as const

/** Prefix reserved for orchestrators; nothing under it is ever written to a file. */
export const INTERNAL_PREFIX = 'internal.config.kubernetes.io/'

/** Key kpt uses to carry a document that is a bare sequence as an item (kyaml WrapBareSeqNode). */
export const BARE_SEQ_KEY = 'bareSeqNodeWrappingKey'

/** Sequence indentation styles, as kpt records them in the seqindent annotation. */
export type SeqIndent = 'compact' | 'wide'

/** File names kpt reads as resources (pkg.MatchAllKRM): Kptfile, *.yaml, *.yml, *.json. */
export function isResourceFileName(name: string): boolean {
  return name === 'Kptfile' || name.endsWith('.yaml') || name.endsWith('.yml') || name.endsWith('.json')
}

export const KPTFILE = 'Kptfile'
export const KRMIGNORE = '.krmignore'
