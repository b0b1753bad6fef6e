/**
 * kpt's resource selection for one function (`fnr eval --match-*`/`--exclude-*`, a Kptfile
 * function's `selectors`/`exclude`): a resource is sent when it matches any selector (or there
 * are none) and no exclusion. Every resource is numbered with `internal.config.k8s.io/kpt-resource-id`
 * (its index in the whole list, as kpt does) so the function's output can be merged back: a sent
 * resource is replaced by the output with its id (or dropped when the output has none), the
 * others stay, and new resources are appended.
 */
import {isMap, isScalar, type YAMLMap} from 'yaml'

import {A} from './constants.js'
import {deleteAnnotation, getAnnotation, metaOf, setAnnotation} from './meta.js'
import {getIn, scalarString} from './yaml.js'

export interface Selector {
  apiVersion?: string
  kind?: string
  name?: string
  namespace?: string
  labels?: Record<string, string>
  annotations?: Record<string, string>
}

export function isEmptySelector(s: Selector): boolean {
  return !s.apiVersion && !s.kind && !s.name && !s.namespace && Object.keys(s.labels ?? {}).length === 0 && Object.keys(s.annotations ?? {}).length === 0
}

/** A string map of the metadata (labels, annotations) with each value's text, as kpt compares them. */
function metadataStrings(item: YAMLMap, key: 'labels' | 'annotations'): Map<string, string> {
  const out = new Map<string, string>()
  const m = getIn(getIn(item, 'metadata'), key)
  if (!isMap(m)) return out
  for (const pair of m.items) {
    const value = scalarString(pair.value)
    if (isScalar(pair.key) && value !== undefined) out.set(String(pair.key.value), value)
  }
  return out
}

/** Whether an item matches a selector; values are compared as text (`app: 3` matches "3"). */
export function matchesSelector(item: YAMLMap, s: Selector): boolean {
  const m = metaOf(item)
  if (s.apiVersion && m.apiVersion !== s.apiVersion) return false
  if (s.kind && m.kind !== s.kind) return false
  if (s.name && m.name !== s.name) return false
  if (s.namespace && m.namespace !== s.namespace) return false
  for (const [key, want] of [['labels', s.labels], ['annotations', s.annotations]] as const) {
    const have = metadataStrings(item, key)
    for (const [k, v] of Object.entries(want ?? {})) if (have.get(k) !== v) return false
  }
  return true
}

export interface Selection {
  /** Whether any selector or exclusion applies (else every item is sent and nothing is tagged). */
  filtered: boolean
  selected: YAMLMap[]
  /** Merges the function's output items back into the whole list (and removes the ids). */
  merge(output: YAMLMap[]): YAMLMap[]
}

export function selectResources(items: YAMLMap[], selectors: Selector[], exclude: Selector[]): Selection {
  const sel = selectors.filter((s) => !isEmptySelector(s))
  const exc = exclude.filter((s) => !isEmptySelector(s))
  const filtered = sel.length > 0 || exc.length > 0
  if (!filtered) return {filtered, selected: items, merge: (output) => output}
  items.forEach((it, i) => setAnnotation(it, A.kptResourceId, String(i)))
  const selected = items.filter((it) => (sel.length === 0 || sel.some((s) => matchesSelector(it, s))) && !exc.some((s) => matchesSelector(it, s)))
  return {
    filtered,
    selected,
    merge(output) {
      // The ids first: an output item may be the very node that was sent (render keeps the
      // nodes a function gives back unchanged, reuse.ts), and its id is removed below.
      const ids = items.map((item) => getAnnotation(item, A.kptResourceId))
      const byId = new Map<string, YAMLMap>()
      const added: YAMLMap[] = []
      for (const item of output) {
        const id = getAnnotation(item, A.kptResourceId)
        deleteAnnotation(item, A.kptResourceId)
        // an empty id is no id (kpt tests for ""): a new resource, never dropped
        if (id === undefined || id === '') added.push(item)
        else byId.set(id, item)
      }
      const sent = new Set(selected)
      const merged: YAMLMap[] = []
      for (const [i, item] of items.entries()) {
        const id = ids[i]
        deleteAnnotation(item, A.kptResourceId)
        if (!sent.has(item)) merged.push(item)
        else {
          const out = id === undefined ? undefined : byId.get(id)
          if (out) merged.push(out)
        }
      }
      return [...merged, ...added]
    },
  }
}
