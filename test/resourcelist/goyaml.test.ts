/**
 * src/lib/resourcelist/goyaml.ts: renderings of the Go encoders kpt uses. `goYaml` is go-yaml v3
 * Marshal with kyaml's settings (kpt's results.yaml); `goJson` is encoding/json's indented Encoder
 * (resources written to .json files). The expected texts were produced by kyaml v0.19.0's encoder
 * (go-yaml v3) and Go 1.x encoding/json; test/resourcelist/results.test.ts compares a whole
 * results.yaml with kpt's and has the basic scalar styles.
 */
import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import {goFloat, goJson, goYaml} from '../../src/lib/resourcelist/goyaml.js'

/** The text after `k: ` when the value is under one key. */
const under = (value: unknown) => goYaml({k: value})

describe('resourcelist/goyaml: goYaml values', () => {
  it('renders top-level scalars and empty collections on one line', () => {
    expect(goYaml('x')).to.equal('x\n')
    expect(goYaml(5)).to.equal('5\n')
    expect(goYaml(1.5)).to.equal('1.5\n')
    expect(goYaml(null)).to.equal('null\n')
    expect(goYaml(undefined)).to.equal('null\n')
    expect(goYaml(true)).to.equal('true\n')
    expect(goYaml([])).to.equal('[]\n')
    expect(goYaml({})).to.equal('{}\n')
    expect(goYaml(new Map())).to.equal('{}\n')
  })

  it('double-quotes strings that would read back as another type', () => {
    for (const s of ['1.0', 'true', 'null', '~', 'y', 'Off', '2001-12-14', '1:20', '0x1F', '0o17', '1e3', '.inf', '-.INF', '.NaN']) {
      expect(under(s), s).to.equal(`k: "${s}"\n`)
    }
  })

  it('single-quotes strings that start with an indicator or hold ": " or " #"', () => {
    for (const s of ['-', '- x', '@foo', '`x', 'a #b', '---x', '...x', '?', '? x', ': x', 'a: b', 'a:', '%x', '!x', '&x', '*x', '|', '>', '[x', '{x', ',x', '"quoted"', 'trailing ', ' leading', '   ']) {
      expect(under(s), s).to.equal(`k: '${s}'\n`)
    }
  })

  it('keeps plain what go-yaml keeps plain', () => {
    for (const s of ['-x', 'a#b', 'é', 'a\\b', '?x', ':x', 'a:b', 'x,y', 'x[y]', '<<x', '=', 'a b']) {
      expect(under(s), s).to.equal(`k: ${s}\n`)
    }
  })

  it('double-quotes control and non-BMP characters with go-yaml\'s escapes (upper-case hex)', () => {
    expect(under('\u0001')).to.equal('k: "\\x01"\n')
    expect(under('a\u007fb')).to.equal('k: "a\\x7Fb"\n')
    expect(under('😀')).to.equal('k: "\\U0001F600"\n')
    expect(under('\u0085')).to.equal('k: "\\N"\n')
    expect(under('\ufeff')).to.equal('k: "\\uFEFF"\n')
    expect(under('\ta')).to.equal('k: "\\ta"\n')
    expect(under('x\r\ny')).to.equal('k: "x\\r\\ny"\n')
    expect(under('x\ry')).to.equal('k: "x\\ry"\n')
  })

  it('writes multi-line strings as literal blocks, with the chomping and indentation hints', () => {
    expect(under('a\n\nb')).to.equal('k: |-\n  a\n\n  b\n')
    expect(under('\na')).to.equal('k: |2-\n\n  a\n')
    expect(under('\n')).to.equal('k: |2+\n\n')
    expect(under('a\n\n\n')).to.equal('k: |+\n  a\n\n\n')
    expect(under('a\tb\nc')).to.equal('k: |-\n  a\tb\n  c\n')
  })

  it('double-quotes multi-line strings a literal block cannot hold (a space before a break, a trailing space)', () => {
    expect(under('a\n ')).to.equal('k: "a\\n "\n')
    expect(under('a \n')).to.equal('k: "a \\n"\n')
  })

  it('formats numbers as Go does', () => {
    const cases: Array<[number, string]> = [
      [100, '100'],
      [0.0001, '0.0001'],
      [0.00001, '1e-05'],
      [1e-7, '1e-07'],
      [123456.5, '123456.5'],
      [1234567.5, '1.2345675e+06'],
      [1.5e300, '1.5e+300'],
      [-2.5, '-2.5'],
      [-0.00001, '-1e-05'],
    ]
    for (const [n, text] of cases) expect(under(n), String(n)).to.equal(`k: ${text}\n`)
  })
})

describe('resourcelist/goyaml: goYaml keys and structure', () => {
  it('quotes keys like values', () => {
    expect(goYaml({'': 'x'})).to.equal('"": x\n')
    expect(goYaml({'a b': 1})).to.equal('a b: 1\n')
    expect(goYaml({'a: b': 1})).to.equal("'a: b': 1\n")
    expect(goYaml({1: 1})).to.equal('"1": 1\n')
    expect(goYaml({true: 1})).to.equal('"true": 1\n')
    expect(goYaml({'-': 1})).to.equal("'-': 1\n")
    expect(goYaml({'é': 1})).to.equal('é: 1\n')
  })

  it('sorts the keys of a plain object (a Go map), and keeps a Map\'s order (a Go struct)', () => {
    expect(goYaml({b: 1, a: 2, B: 3})).to.equal('B: 3\na: 2\nb: 1\n')
    // by code point: U+FFFF before U+10000, unlike UTF-16 order
    expect(goYaml({'\u{10000}': 1, '\uffff': 2})).to.equal('"\\uFFFF": 2\n"\\U00010000": 1\n')
    expect(goYaml(new Map<string, unknown>([['b', 1], ['a', 2]]))).to.equal('b: 1\na: 2\n')
  })

  it('orders a Go map\'s keys as go-yaml does: runs of digits as numbers, non-letters before letters (kpt\'s results.yaml)', () => {
    // what kpt 1.0.0-beta.56 writes for these tags
    expect(goYaml({a10: 1, a9: 2, a_: 3, aB: 4})).to.equal('a_: 3\na9: 2\na10: 1\naB: 4\n')
    expect(goYaml({x10: 1, x9: 2})).to.equal('x9: 2\nx10: 1\n')
    expect(goYaml({'v1.10': 1, 'v1.9': 2, 'v1.09': 3})).to.equal('v1.9: 2\nv1.09: 3\nv1.10: 1\n')
  })

  it('quotes what go-yaml reads back as a timestamp (Go\'s four layouts, fields in range), and only that (kpt\'s results.yaml)', () => {
    for (const s of ['2001-12-14', '2001-1-2', '2001-12-14T21:59:43Z', '2001-12-14t21:59:43.10-05:00', '2001-12-14 21:59:43.10', '2001-12-14 1:2:3', '2000-02-29', '0000-02-29']) {
      expect(goYaml({v: s}), s).to.equal(`v: "${s}"\n`)
    }
    // plain in kpt 1.0.0-beta.56's results.yaml: no layout of Go's takes them
    for (const s of ['2001-12-14 21:59:43.10 -5', '2001-12-14T21:59:43', '2001-12-14T21:59:43+05', '2001-12-14T21:59:43 Z', '2001-12-14 21:59:43.10Z']) {
      expect(goYaml({v: s}), s).to.equal(`v: ${s}\n`)
    }
    // out of range, or not four year digits: a string to Go
    for (const s of ['2001-13-01', '2001-02-29', '1900-02-29', '2001-04-31', '2001-12-14T24:00:00Z', '2001-12-14T21:60:00Z', '201-12-14', '2001-012-14']) {
      expect(goYaml({v: s}), s).to.equal(`v: ${s}\n`)
    }
  })

  it('writes a value `<<` plain as go-yaml does, and quotes it as a key, where a YAML 1.1 reader would merge', () => {
    expect(goYaml({message: '<<'})).to.equal('message: <<\n')
    expect(goYaml({'<<': 'y'})).to.equal('"<<": "y"\n')
  })

  it('omits undefined fields and members, and writes null ones', () => {
    expect(goYaml(new Map<string, unknown>([['a', undefined], ['b', null], ['c', 1]]))).to.equal('b: null\nc: 1\n')
    expect(goYaml({a: undefined, b: 1})).to.equal('b: 1\n')
  })

  it('nests maps by two spaces', () => {
    expect(goYaml({a: {b: {c: 1}}})).to.equal('a:\n  b:\n    c: 1\n')
  })

  it('writes sequences compact by default and wide when asked', () => {
    const cases: Array<[unknown, string, string]> = [
      [{items: [{a: 1, b: 2}]}, 'items:\n- a: 1\n  b: 2\n', 'items:\n  - a: 1\n    b: 2\n'],
      [{a: [{m: 'x\ny'}]}, 'a:\n- m: |-\n    x\n    y\n', 'a:\n  - m: |-\n      x\n      y\n'],
      [{a: [[1, 2], []]}, 'a:\n- - 1\n  - 2\n- []\n', 'a:\n  - - 1\n    - 2\n  - []\n'],
      [{a: [{}, [], null, '']}, 'a:\n- {}\n- []\n- null\n- ""\n', 'a:\n  - {}\n  - []\n  - null\n  - ""\n'],
      [{b: [[{x: 1}]]}, 'b:\n- - x: 1\n', 'b:\n  - - x: 1\n'],
      [[['a']], '- - a\n', '- - a\n'],
      [[{a: 1}], '- a: 1\n', '- a: 1\n'],
      [[{a: [1]}], '- a:\n  - 1\n', '- a:\n    - 1\n'],
      [[1, 'a'], '- 1\n- a\n', '- 1\n- a\n'],
    ]
    for (const [value, compact, wide] of cases) {
      expect(goYaml(value), JSON.stringify(value)).to.equal(compact)
      expect(goYaml(value, {wideSeq: true}), `wide ${JSON.stringify(value)}`).to.equal(wide)
    }
  })
})

describe('resourcelist/goyaml: goFloat', () => {
  it('writes YAML\'s special floats', () => {
    expect(goFloat(Number.NaN)).to.equal('.nan')
    expect(goFloat(Number.POSITIVE_INFINITY)).to.equal('.inf')
    expect(goFloat(Number.NEGATIVE_INFINITY)).to.equal('-.inf')
  })

  it('writes integers whole below 1e21 and in exponent form from there', () => {
    expect(goFloat(0)).to.equal('0')
    expect(goFloat(-42)).to.equal('-42')
    expect(goFloat(2 ** 53)).to.equal('9007199254740992')
    expect(goFloat(1e21)).to.equal('1e+21')
    expect(goFloat(-1.5e22)).to.equal('-1.5e+22')
  })

  it('uses two exponent digits at least, as Go\'s strconv', () => {
    expect(goFloat(1.5e-10)).to.equal('1.5e-10')
    expect(goFloat(2e-9)).to.equal('2e-09')
    expect(goFloat(1.25e100)).to.equal('1.25e+100')
  })
})

describe('resourcelist/goyaml: goJson', () => {
  it('indents by two spaces, sorts keys by bytes at every depth, and ends with a newline', () => {
    expect(goJson({b: 1, a: {d: [1, {z: true, y: null}], c: 'x'}})).to.equal(
      '{\n  "a": {\n    "c": "x",\n    "d": [\n      1,\n      {\n        "y": null,\n        "z": true\n      }\n    ]\n  },\n  "b": 1\n}\n',
    )
    expect(goJson({'\u{10000}': 1, '\uffff': 2})).to.equal('{\n  "\uffff": 2,\n  "\u{10000}": 1\n}\n')
  })

  it('escapes <, >, & and the JavaScript line separators, as Go\'s HTML-safe encoder', () => {
    expect(goJson({k: '<a href="x">&</a>\u2028\u2029'})).to.equal('{\n  "k": "\\u003ca href=\\"x\\"\\u003e\\u0026\\u003c/a\\u003e\\u2028\\u2029"\n}\n')
  })

  it('writes empty collections and scalars', () => {
    expect(goJson({})).to.equal('{}\n')
    expect(goJson([])).to.equal('[]\n')
    expect(goJson({a: [], b: {}})).to.equal('{\n  "a": [],\n  "b": {}\n}\n')
    expect(goJson('x')).to.equal('"x"\n')
    expect(goJson(null)).to.equal('null\n')
  })

  it('keeps a Map\'s order and drops its undefined members', () => {
    expect(goJson(new Map<string, unknown>([['b', 1], ['a', undefined], ['c', 2]]))).to.equal('{\n  "b": 1,\n  "c": 2\n}\n')
  })

  it('refuses NaN and the infinities as Go does ("json: unsupported value"), at any depth', () => {
    for (const [value, text] of [[Number.NaN, 'NaN'], [{a: [Number.POSITIVE_INFINITY]}, 'Infinity'], [{a: Number.NEGATIVE_INFINITY}, '-Infinity']] as const) {
      let err: unknown
      try {
        goJson(value)
      } catch (e) {
        err = e
      }
      expect(err, text).to.be.instanceOf(FnrError)
      expect((err as FnrError).kind).to.equal('InvalidArgument')
      expect((err as FnrError).message).to.equal(`json: unsupported value: ${text}`)
    }
  })
})
