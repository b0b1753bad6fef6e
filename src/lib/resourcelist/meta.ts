/**
 * Reading and editing a resource's identity and annotations on YAML nodes, the way kyaml does:
 * new annotations are appended single-quoted, an existing annotation keeps its position and
 * quoting, and empty `annotations`/`metadata` maps are dropped before writing.
 */
import {isMap, isScalar, Pair, Scalar, YAMLMap, type Node} from 'yaml'

import {FnrError, type ErrorKind} from '../errors.js'
import {getIn, pairOf, quotedScalar, scalarString} from './yaml.js'

export interface ResourceMeta {
  apiVersion: string
  kind: string
  name: string
  namespace: string
}

/** apiVersion, kind, metadata.name and metadata.namespace as strings ('' when absent). */
export function metaOf(item: Node): ResourceMeta {
  const metadata = getIn(item, 'metadata')
  return {
    apiVersion: scalarString(getIn(item, 'apiVersion')) ?? '',
    kind: scalarString(getIn(item, 'kind')) ?? '',
    name: scalarString(getIn(metadata, 'name')) ?? '',
    namespace: scalarString(getIn(metadata, 'namespace')) ?? '',
  }
}

function annotationsMap(item: Node): YAMLMap | undefined {
  const a = getIn(getIn(item, 'metadata'), 'annotations')
  return isMap(a) ? a : undefined
}

/** The value of one annotation, or undefined. */
export function getAnnotation(item: Node, key: string): string | undefined {
  const a = annotationsMap(item)
  if (!a) return undefined
  const pair = pairOf(a, key)
  return pair ? (scalarString(pair.value) ?? '') : undefined
}

/** All annotations as strings, in order. */
export function annotationsOf(item: Node): Map<string, string> {
  const out = new Map<string, string>()
  const a = annotationsMap(item)
  if (!a) return out
  for (const pair of a.items) {
    if (isScalar(pair.key)) out.set(String(pair.key.value), scalarString(pair.value) ?? '')
  }
  return out
}

function isEmptyValue(v: unknown): boolean {
  if (v === null || v === undefined) return true
  if (isScalar(v)) return v.value === null || v.value === '' || v.value === undefined
  return isMap(v) && v.items.length === 0
}

/** Sets an annotation, creating metadata/annotations at the end of their parent when missing. */
export function setAnnotation(item: Node, key: string, value: string, kind: ErrorKind = 'InvalidArgument'): void {
  if (!isMap(item)) throw new FnrError(kind, 'wrong node kind: expected MappingNode')
  const annotations = ensureMap(ensureMap(item, 'metadata', kind), 'annotations', kind)
  const pair = pairOf(annotations, key)
  if (pair) {
    if (isScalar(pair.value)) pair.value.value = value
    else pair.value = quotedScalar(value)
    return
  }
  annotations.items.push(new Pair(new Scalar(key), quotedScalar(value)))
}

function ensureMap(parent: YAMLMap, key: string, kind: ErrorKind): YAMLMap {
  const pair = pairOf(parent, key)
  if (pair && isMap(pair.value) && pair.value.items.length > 0) return pair.value
  if (pair && !isEmptyValue(pair.value)) {
    throw new FnrError(kind, `wrong node kind: expected MappingNode for ${key}`)
  }
  if (pair) parent.items.splice(parent.items.indexOf(pair), 1)
  const map = new YAMLMap()
  if (parent.flow) map.flow = true
  parent.items.push(new Pair(new Scalar(key), map))
  return map
}

/** Removes an annotation; returns whether it was there. */
export function deleteAnnotation(item: Node, key: string): boolean {
  const a = annotationsMap(item)
  if (!a) return false
  const pair = pairOf(a, key)
  if (!pair) return false
  a.items.splice(a.items.indexOf(pair), 1)
  return true
}

/** Removes `metadata.annotations` when empty, then `metadata` when empty (kyaml ClearEmptyAnnotations). */
export function clearEmptyAnnotations(item: Node): void {
  if (!isMap(item)) return
  const mpair = pairOf(item, 'metadata')
  if (!mpair || !isMap(mpair.value)) return
  const apair = pairOf(mpair.value, 'annotations')
  if (apair && isEmptyValue(apair.value)) mpair.value.items.splice(mpair.value.items.indexOf(apair), 1)
  if (mpair.value.items.length === 0) item.items.splice(item.items.indexOf(mpair), 1)
}

/** kpt's IsKRM: the error text for a resource that is not KRM, or undefined. */
export function krmError(item: Node, path: string | undefined): string | undefined {
  if (isKustomization(item, path)) return undefined
  if (!isMap(item)) return 'resource must have `apiVersion`, `kind`, and `name`'
  const metadata = getIn(item, 'metadata')
  if (metadata !== undefined && metadata !== null && !isMap(metadata) && !isEmptyValue(metadata)) {
    return 'resource must have `apiVersion`, `kind`, and `name`'
  }
  const m = metaOf(item)
  if (m.apiVersion === '') return 'resource must have `apiVersion`'
  if (m.kind === '') return 'resource must have `kind`'
  if (m.name === '') return 'resource must have `metadata.name`'
  return undefined
}

const KUSTOMIZATION_FILES = new Set(['kustomization.yaml', 'kustomization.yml', 'Kustomization'])

function isKustomization(item: Node, path: string | undefined): boolean {
  if (path) {
    const base = path.slice(path.lastIndexOf('/') + 1)
    if (KUSTOMIZATION_FILES.has(base)) return true
  }
  const m = metaOf(item)
  if (m.apiVersion.startsWith('kustomize.config.k8s.io')) return true
  return m.apiVersion === '' && m.kind === 'Kustomization'
}
