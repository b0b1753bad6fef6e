/**
 * A small, strict XML reader for checking JUnit reports: elements, attributes, text, the five
 * predefined entities and numeric character references. It throws on anything malformed
 * (unbalanced tags, unquoted or duplicate attributes, a raw `<` or `&` in text, characters XML 1.0
 * does not allow), so a report that parses here is well-formed.
 */
export interface XmlElement {
  name: string
  attrs: Record<string, string>
  children: XmlElement[]
  text: string
}

const NAME = /^[A-Za-z_:][-A-Za-z0-9_.:]*/
const INVALID_CHAR = /[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/u

function decode(raw: string, where: string): string {
  if (INVALID_CHAR.test(raw)) throw new Error(`invalid XML character in ${where}`)
  return raw.replace(/&([^;]*);|&/g, (m, ent: string | undefined) => {
    if (ent === undefined) throw new Error(`bare & in ${where}`)
    const named: Record<string, string> = {amp: '&', lt: '<', gt: '>', quot: '"', apos: "'"}
    if (ent in named) return named[ent]!
    const num = /^#(x[0-9a-fA-F]+|[0-9]+)$/.exec(ent)
    if (!num) throw new Error(`unknown entity &${ent}; in ${where}`)
    const code = num[1]!.startsWith('x') ? Number.parseInt(num[1]!.slice(1), 16) : Number(num[1])
    const ch = String.fromCodePoint(code)
    if (INVALID_CHAR.test(ch)) throw new Error(`character reference to an invalid character in ${where}`)
    return ch
  })
}

export function parseXml(xml: string): XmlElement {
  let i = 0
  const declaration = /^<\?xml[^?]*\?>\s*/.exec(xml)
  if (declaration) i = declaration[0].length
  const root: XmlElement = {name: '#document', attrs: {}, children: [], text: ''}
  const stack: XmlElement[] = [root]
  while (i < xml.length) {
    const lt = xml.indexOf('<', i)
    const text = xml.slice(i, lt < 0 ? xml.length : lt)
    const top = stack[stack.length - 1]!
    if (stack.length === 1 && text.trim() !== '') throw new Error('text outside the root element')
    top.text += decode(text, `<${top.name}>`)
    if (lt < 0) break
    const gt = xml.indexOf('>', lt)
    if (gt < 0) throw new Error('unterminated tag')
    const tag = xml.slice(lt + 1, gt)
    i = gt + 1
    if (tag.startsWith('/')) {
      const name = tag.slice(1).trim()
      const open = stack.pop()
      if (!open || open.name !== name || stack.length === 0) throw new Error(`unbalanced </${name}>`)
      continue
    }
    const selfClosing = tag.endsWith('/')
    const body = selfClosing ? tag.slice(0, -1) : tag
    const nameMatch = NAME.exec(body)
    if (!nameMatch) throw new Error(`bad tag <${tag}>`)
    const el: XmlElement = {name: nameMatch[0], attrs: {}, children: [], text: ''}
    let rest = body.slice(nameMatch[0].length)
    while (rest.trim() !== '') {
      const m = /^\s+([A-Za-z_:][-A-Za-z0-9_.:]*)="([^"<]*)"/.exec(rest)
      if (!m) throw new Error(`bad attributes in <${el.name}>: ${JSON.stringify(rest.slice(0, 40))}`)
      if (m[1]! in el.attrs) throw new Error(`duplicate attribute ${m[1]} in <${el.name}>`)
      el.attrs[m[1]!] = decode(m[2]!, `${el.name}@${m[1]}`)
      rest = rest.slice(m[0].length)
    }
    if (stack.length === 1 && root.children.length > 0) throw new Error('more than one root element')
    stack[stack.length - 1]!.children.push(el)
    if (!selfClosing) stack.push(el)
  }
  if (stack.length !== 1) throw new Error(`unclosed <${stack[stack.length - 1]!.name}>`)
  if (root.children.length !== 1) throw new Error('no root element')
  return root.children[0]!
}

/** Every element named `name` under el (depth first). */
export function findAll(el: XmlElement, name: string): XmlElement[] {
  const out: XmlElement[] = []
  for (const c of el.children) {
    if (c.name === name) out.push(c)
    out.push(...findAll(c, name))
  }
  return out
}
