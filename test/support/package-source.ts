/**
 * For reading packages with fnr source (test/resourcelist/source.test.ts, source-reading.test.ts):
 * the path annotations of the items read, and a package tree for .krmignore patterns.
 */
import {parse} from 'yaml'

/** `path#index` of each item of the ResourceList `text`, from its internal.config.kubernetes.io annotations. */
export const pathsOf = (text: string): string[] =>
  (parse(text).items as Array<{metadata: {annotations: Record<string, string>}}>).map(
    (i) => `${i.metadata.annotations['internal.config.kubernetes.io/path']}#${i.metadata.annotations['internal.config.kubernetes.io/index']}`,
  )

/** A package (file name: content) with files at several depths, as YAML and JSON, for .krmignore patterns to pick from. */
export const KRMIGNORE_FILES: Record<string, string> = {
  'sub/x/a.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sxa\n',
  'sub/deep/d.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sdd\n',
  'sub/a.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sa\n',
  'sub/c.yml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sc\n',
  'x/a.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: xa\n',
  'a.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n',
  'sub2/b.json': '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"s2b"}}',
  'b.json': '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b"}}',
}
