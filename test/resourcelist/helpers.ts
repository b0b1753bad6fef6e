/**
 * Test helpers for the resourcelist suite: temporary directories, file trees, and running the
 * real kpt (1.0.0-beta.56 at /usr/bin/kpt) for interop comparisons.
 */
import {spawnSync} from 'node:child_process'
import {existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync} from 'node:fs'
import {createRequire} from 'node:module'
import {tmpdir} from 'node:os'
import {dirname, join} from 'node:path'

export const KPT = process.env.KPT_BIN ?? '/usr/bin/kpt'

/** Throws a clear error when kpt is missing: the interop tests need it. */
export function requireKpt(): string {
  if (!existsSync(KPT)) throw new Error(`kpt not found at ${KPT}: the resourcelist interop tests need kpt 1.0.0-beta.56 (set KPT_BIN to use another path)`)
  return KPT
}

export interface KptResult {
  status: number
  stdout: string
  stderr: string
}

export function kpt(args: readonly string[], options: {cwd?: string; input?: string} = {}): KptResult {
  const r = spawnSync(requireKpt(), args, {cwd: options.cwd, input: options.input ?? '', encoding: 'utf8', maxBuffer: 64 * 1024 * 1024})
  if (r.error) throw r.error
  return {status: r.status ?? -1, stdout: r.stdout, stderr: r.stderr}
}

/** A scratch area removed by cleanup(). */
export class Scratch {
  readonly root = mkdtempSync(join(tmpdir(), 'fnr-rl-'))
  private n = 0

  /** A fresh path (not created) under the scratch root. */
  path(name = 'd'): string {
    return join(this.root, `${name}-${++this.n}`)
  }

  /** Creates a directory holding these files (path -> content; `->target` makes a symlink). */
  tree(files: Record<string, string>, name = 'pkg'): string {
    const dir = this.path(name)
    writeTree(dir, files)
    return dir
  }

  cleanup(): void {
    rmSync(this.root, {recursive: true, force: true})
  }
}

export function writeTree(dir: string, files: Record<string, string>): void {
  mkdirSync(dir, {recursive: true})
  for (const [rel, content] of Object.entries(files)) {
    const p = join(dir, rel)
    mkdirSync(dirname(p), {recursive: true})
    if (content.startsWith('->')) symlinkSync(content.slice(2), p)
    else writeFileSync(p, content)
  }
}

/** All regular files under dir (relative path -> content), sorted. */
export function readTree(dir: string): Record<string, string> {
  const out: Record<string, string> = {}
  const walk = (d: string, rel: string) => {
    for (const e of readdirSync(d, {withFileTypes: true}).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const r = rel ? `${rel}/${e.name}` : e.name
      if (e.isDirectory()) walk(join(d, e.name), r)
      else if (e.isFile()) out[r] = readFileSync(join(d, e.name), 'utf8')
    }
  }
  walk(dir, '')
  return out
}

/** Copies a tree into a fresh scratch directory. */
export function copyTree(scratch: Scratch, from: string, name = 'copy'): string {
  const to = scratch.path(name)
  const r = spawnSync('cp', ['-a', from, to])
  if (r.status !== 0) throw new Error(`cp failed: ${r.stderr}`)
  return to
}

/** The `yaml` package's CommonJS entry, for function scripts written by tests. */
export const YAML_CJS = createRequire(import.meta.url).resolve('yaml')

/**
 * Sample packages used by several tests: comments, wide and compact lists, subdirectories,
 * multi-document files, JSON, hidden directories, a subpackage and .krmignore files.
 */
export const PACKAGES: Record<string, Record<string, string>> = {
  basic: {
    Kptfile: 'apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: basic\n  annotations:\n    config.kubernetes.io/local-config: "true"\n',
    'deploy.yaml': [
      '# leading comment',
      'apiVersion: apps/v1',
      'kind: Deployment',
      'metadata:',
      '  name: web # the web deployment',
      'spec:',
      '  template:',
      '    spec:',
      '      containers:',
      '        - name: a',
      '          image: "nginx"',
      '          args:',
      '            - x',
      '---',
      '# svc comment',
      'apiVersion: v1',
      'kind: Service',
      'metadata:',
      '  name: web-svc',
      'spec:',
      '  ports:',
      '  - port: 80',
      '',
    ].join('\n'),
    'sub/cm.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\n  namespace: old\ndata:\n  key: "42"\n',
  },
  mixed: {
    '.hidden/h.yml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hidden\n',
    '.hid.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hid\n',
    'j.json': '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"js"},"data":{"a":"b","n":"5"}}\n',
    'README.md': 'not yaml\n',
    'notes.txt': 'apiVersion: v1\n',
    'a/x.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ax\n',
    'a-b/x.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: abx\n',
    'a.b/x.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: adotbx\n',
    'a.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n',
    'B.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: upper-b\n',
    'empty.yaml': '',
    'comment-only.yaml': '# nothing here\n',
    'multi.yaml': '---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: m1\n---\n# between\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: m2\ndata:\n  list:\n    - wide\n...\n',
    'crlf.yaml': 'apiVersion: v1\r\nkind: ConfigMap\r\nmetadata:\r\n  name: crlf\r\n',
    'list.yaml': 'apiVersion: v1\nkind: List\nmetadata:\n  name: a-list\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: inlist\n',
  },
  rich: {
    'rich.yaml': [
      '---',
      '# head comment',
      '',
      '# second head comment after blank',
      'apiVersion: v1   # trailing on apiVersion',
      'kind: ConfigMap',
      'metadata:',
      '  name: rich',
      '  labels: {a: b, c: "d"}',
      '',
      '',
      '  annotations:',
      "    x: 'single'",
      'data:',
      '  plain: hello world',
      '  quoted: "double"',
      '  num: "42"',
      "  bool: 'true'",
      '  empty: ""',
      '  nullv:',
      '  tilde: ~',
      '  long: aaaaaaaaaa bbbbbbbbbb cccccccccc dddddddddd eeeeeeeeee ffffffffff gggggggggg hhhhhhhhhh iiiiiiiiii jjjjjjjjjj',
      '  block: |',
      '    line1',
      '    line2',
      '  folded: >-',
      '    folded text',
      '    more',
      '  keep: |+',
      '    kept',
      '',
      '  # comment before key',
      '  after: x',
      '  multiline_plain: this is',
      '    continued',
      '  dq_escape: "tab\\there \\u00e9"',
      '  colon: "a: b"',
      '  anchor: &anc value',
      '  alias: *anc',
      'list:',
      '- a',
      '-   b',
      '- - nested1',
      '  - nested2',
      '- k: v',
      '  k2: v2',
      '- {x: 1}',
      '- [1, 2]',
      'emptylist: []',
      'emptymap: {}',
      'int: 5',
      'float: 1.50',
      'hex: 0x1F',
      'date: 2001-12-14',
      'str_bool: yes',
      '...',
      '---',
      '# doc2 comment only at top',
      'apiVersion: v1',
      'kind: ConfigMap',
      'metadata:',
      '  name: two',
      '',
    ].join('\n'),
    'wide/w.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: w\n  finalizers:\n    # a comment line\n    - one\n    - two\n',
  },
  subpkgs: {
    Kptfile: 'apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: root\n',
    '.krmignore': '*.json\nchild/c.yaml\nd.yaml\nignored/\n',
    'ignored/x.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ignored\n',
    'e.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: e\n',
    'f.json': '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"f"}}\n',
    'sub/.krmignore': 'x/\n',
    'sub/b.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n',
    'sub/x/a.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: subxa\n',
    'child/Kptfile': 'apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: child\n',
    'child/.krmignore': 'deep/\n',
    'child/c.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n',
    'child/d.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: d\n',
    'child/g.json': '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"g"}}\n',
    'child/deep/x.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deep\n',
  },
}
