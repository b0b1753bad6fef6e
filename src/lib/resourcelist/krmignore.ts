/**
 * `.krmignore` files, as kpt reads them (kyaml ignoreFilesMatcher on go-gitignore):
 *
 * - one pattern per line, surrounding spaces trimmed; empty lines and `#` lines are skipped;
 * - `!pattern` re-includes; a path matched by any `!` pattern is never ignored (order does not
 *   matter, unlike git);
 * - `dir/` matches directories only (and so everything under them);
 * - `/a/b` is anchored at the package root and matches the whole relative path;
 * - any other pattern matches the last path segments: `a.yaml` matches `x/a.yaml`, `x/a.yaml`
 *   matches `sub/x/a.yaml`;
 * - segments use Go `filepath.Match` globs (`*`, `?`, `[a-z]`, `[^a]`, `\x`); `*` never crosses `/`
 *   and `**` is the same as `*`.
 *
 * Known difference: go-gitignore fails to match some anchored directory patterns (`/x/`,
 * `/a/b` naming a directory); fnr matches them as written.
 */

interface Pattern {
  anchored: boolean
  dirOnly: boolean
  segments: RegExp[]
}

export class IgnoreMatcher {
  private readonly ignore: Pattern[] = []
  private readonly accept: Pattern[] = []

  constructor(text: string) {
    for (const raw of text.split(/\r?\n/)) {
      const line = raw.replace(/^ +| +$/g, '')
      if (line === '' || line.startsWith('#')) continue
      if (line.startsWith('!')) {
        const p = compile(line.slice(1))
        if (p) this.accept.push(p)
      } else {
        const p = compile(line)
        if (p) this.ignore.push(p)
      }
    }
  }

  /** Whether a path (relative to the package root, `/`-separated) is ignored. */
  ignores(relPath: string, isDir: boolean): boolean {
    if (this.ignore.length === 0) return false
    const parts = relPath.split('/')
    if (this.accept.some((p) => matches(p, parts, isDir))) return false
    return this.ignore.some((p) => matches(p, parts, isDir))
  }
}

function compile(pattern: string): Pattern | undefined {
  const anchored = pattern.startsWith('/')
  const dirOnly = pattern.endsWith('/')
  const body = pattern.replace(/^\/+/, '').replace(/\/+$/, '')
  if (body === '') return undefined
  return {anchored, dirOnly, segments: body.split('/').map(globToRegExp)}
}

function matches(p: Pattern, parts: string[], isDir: boolean): boolean {
  if (p.dirOnly && !isDir) return false
  const n = p.segments.length
  if (p.anchored ? parts.length !== n : parts.length < n) return false
  const offset = parts.length - n
  for (let i = 0; i < n; i++) {
    if (!p.segments[i]!.test(parts[offset + i]!)) return false
  }
  return true
}

/** Go filepath.Match for one path segment, as a RegExp. */
export function globToRegExp(glob: string): RegExp {
  let re = ''
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!
    if (c === '*') {
      re += '[^/]*'
    } else if (c === '?') {
      re += '[^/]'
    } else if (c === '\\' && i + 1 < glob.length) {
      re += escapeRe(glob[++i]!)
    } else if (c === '[') {
      const end = glob.indexOf(']', i + 2)
      if (end < 0) {
        re += '\\['
        continue
      }
      let cls = glob.slice(i + 1, end)
      const negate = cls.startsWith('^')
      if (negate) cls = cls.slice(1)
      re += `[${negate ? '^' : ''}${cls.replace(/[\\\]]/g, (m) => `\\${m}`)}]`
      i = end
    } else {
      re += escapeRe(c)
    }
  }
  return new RegExp(`^${re}$`)
}

function escapeRe(c: string): string {
  return c.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')
}
