/** "Did you mean …?" for mistyped commands and flags: the closest candidate by edit distance. */

function distance(a: string, b: string): number {
  const prev = Array.from({length: b.length + 1}, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    let diag = prev[0]!
    prev[0] = i
    for (let j = 1; j <= b.length; j++) {
      const up = prev[j]!
      prev[j] = Math.min(prev[j]! + 1, prev[j - 1]! + 1, diag + (a[i - 1] === b[j - 1] ? 0 : 1))
      diag = up
    }
  }
  return prev[b.length]!
}

/** The candidate closest to word, if it is close enough to be what was meant (or word is its prefix). */
export function closest(word: string, candidates: Iterable<string>): string | undefined {
  let best: string | undefined
  let bestScore = Number.POSITIVE_INFINITY
  for (const c of candidates) {
    const d = c.startsWith(word) && word.length >= 3 ? 0.5 : distance(word, c)
    if (d < bestScore) {
      best = c
      bestScore = d
    }
  }
  return best !== undefined && bestScore <= Math.max(2, Math.floor(word.length / 3)) && bestScore < word.length ? best : undefined
}

/** "; did you mean --exec?" for an unknown flag (with its leading dashes), or "". */
export function flagHint(flag: string, names: Iterable<string>): string {
  const bare = flag.replace(/^-+/, '').replace(/=.*$/, '')
  const all = new Set<string>()
  for (const n of names) {
    all.add(n)
  }
  const match = closest(bare, all)
  return match ? `; did you mean --${match}?` : ''
}
