/**
 * Reading a function's output item by item, without parsing again the items it gave back
 * unchanged (fnr render, fnr eval).
 *
 * A pipeline step sends every item as a block of text (its `- ` line and the lines under it,
 * write.ts stringifyResourceListSteps); a function that leaves an item alone usually writes that
 * block back byte for byte (kpt's Go SDK keeps the formatting it read, and a shell filter or a
 * `cat` does too), only the order of the items may change. Parsing such a block gives back the
 * node it was written from, so the input's node is kept and only the other blocks are parsed.
 *
 * Those are parsed one block at a time (read.ts parseItemBlocksInterruptible), and the text
 * around the items on its own: the same nodes as one parse of the whole text, for less work. The
 * YAML parser's tokens of a small block are garbage before the next young-generation collection,
 * where a whole list's tokens live until its end and are copied by every collection meanwhile.
 *
 * It is done only where the text's layout leaves no doubt about which lines belong to which item
 * (splitListItems), and only where a block cannot mean anything else in its new neighbourhood:
 * no anchor, alias or tag anywhere in the items (an alias may name another item's anchor), no
 * item ending in a comment line (the parser may give such a comment to the next item), each input
 * item kept at most once, and each block must parse as exactly one item, with no error.
 * Anything else, and any error, goes the whole-text way (read.ts), which gives the messages and
 * line numbers as before. The result is the same list either way; test/resourcelist/reuse.test.ts
 * and the render specs against kpt pin that.
 */
import type {YAMLMap} from 'yaml'

import {RESOURCE_LIST_API_VERSION, RESOURCE_LIST_KIND} from './constants.js'
import type {ResourceList} from './read.js'

/** The start of a ResourceList as fnr and kpt's functions write it (items first, block style). */
const HEAD = `apiVersion: ${RESOURCE_LIST_API_VERSION}\nkind: ${RESOURCE_LIST_KIND}\nitems:\n`

export interface ListItemTexts {
  /** Each item's block (its `- ` line up to the next item's), in order. */
  items: string[]
  /** The text after the items (`functionConfig:`, `results:` ...), possibly empty. */
  tail: string
}

/**
 * The item blocks of a ResourceList text laid out as HEAD, then items at column 0 (`- `), then
 * top-level keys; undefined for any other layout (JSON, flow style, a comment or a document
 * marker at column 0, items not at column 0, CR line ends).
 */
export function splitListItems(text: string): ListItemTexts | undefined {
  if (!text.startsWith(HEAD) || text.includes('\r')) return undefined
  const items: string[] = []
  let start = -1
  let pos = HEAD.length
  while (pos < text.length) {
    const nl = text.indexOf('\n', pos)
    const end = nl < 0 ? text.length : nl + 1
    const c = text.charCodeAt(pos)
    if (c === 0x2d /* - */) {
      const next = text.charCodeAt(pos + 1)
      // `- x` or a bare `-` opens an item; `---`, `-x` are no items.
      if (next !== 0x20 && next !== 0x0a && pos + 1 < text.length) return undefined
      if (start >= 0) items.push(text.slice(start, pos))
      start = pos
    } else if (c === 0x20 || c === 0x0a) {
      // Inside an item (lines before the first item: some other layout).
      if (start < 0) return undefined
    } else {
      // A top-level key ends the items; a comment, a document marker or anything else at column 0 is another layout.
      if (!/[A-Za-z]/.test(text[pos]!)) return undefined
      break
    }
    pos = end
  }
  if (start >= 0) items.push(text.slice(start, pos))
  return {items, tail: text.slice(pos)}
}

/** An anchor, alias or tag: `&a`, `*a`, `!t` after a space, an indicator or at a line's start (conservative). */
const NODE_PROPERTY = /(?:^|[\s[{,:-])[&*!]/m

/** Whether the block's last non-empty line is a comment. */
export function endsInComment(block: string): boolean {
  // Lines from the last one up: [start, end) without its newline.
  for (let end = block.length; end > 0; ) {
    const nl = block.lastIndexOf('\n', end - 1)
    const line = block.slice(nl + 1, end).trim()
    if (line !== '') return line.startsWith('#')
    if (nl < 0) return false
    end = nl
  }
  return false
}

export interface ReusePlan {
  /** The text around the items (HEAD and the tail): the list's other fields. */
  frame: string
  /** The blocks that changed, in order: each one is parsed on its own. */
  changed: string[]
  /** For each output item in order: the input item kept, or undefined for the next parsed one. */
  kept: Array<YAMLMap | undefined>
}

/**
 * Which output items are the input's blocks unchanged (`inputTexts[i]` was written for
 * `inputItems[i]`), and the blocks left to parse; undefined when the output cannot be read this
 * way (see the module comment).
 */
export function planReuse(output: string, inputItems: readonly YAMLMap[], inputTexts: readonly string[]): ReusePlan | undefined {
  if (inputItems.length !== inputTexts.length) return undefined
  const split = splitListItems(output)
  if (split === undefined) return undefined
  // Input items by the length of their text: a block is compared only with texts as long as it
  // (no hashing of every block; a changed item usually changed its length too).
  const byLength = new Map<number, number[]>()
  inputTexts.forEach((t, i) => {
    const same = byLength.get(t.length)
    if (same) same.push(i)
    else byLength.set(t.length, [i])
  })
  const kept: Array<YAMLMap | undefined> = []
  const changed: string[] = []
  for (const block of split.items) {
    const candidates = byLength.get(block.length)
    const at = candidates?.findIndex((i) => inputTexts[i] === block) ?? -1
    const item = at >= 0 ? inputItems[candidates![at]!]! : undefined
    if (item !== undefined && !item.flow) {
      // Each input item is kept at most once.
      candidates!.splice(at, 1)
      kept.push(item)
    } else {
      kept.push(undefined)
      changed.push(block)
    }
  }
  if (NODE_PROPERTY.test(output.slice(HEAD.length, output.length - split.tail.length))) return undefined
  if (split.items.some(endsInComment)) return undefined
  return {frame: HEAD + split.tail, changed, kept}
}

/**
 * The output list: the frame's fields, with the kept items and the parsed ones (one per changed
 * block) in the function's order; undefined when the frame held items or is no ResourceList, or
 * when there is another number of parsed items.
 */
export function mergeReused(plan: ReusePlan, frame: ResourceList, parsed: readonly YAMLMap[]): ResourceList | undefined {
  if (frame.items.length !== 0 || !frame.wrapped || parsed.length !== plan.changed.length) return undefined
  let next = 0
  const items = plan.kept.map((item) => item ?? parsed[next++]!)
  return {...frame, items}
}
