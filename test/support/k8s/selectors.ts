/**
 * Label and field selectors with the grammar of k8s.io/apimachinery/pkg/labels and pkg/fields.
 */
import { badRequest } from './status.js';

export type LabelOperator = 'exists' | 'notexists' | '=' | '!=' | 'in' | 'notin' | 'gt' | 'lt';

export interface LabelRequirement {
  key: string;
  op: LabelOperator;
  values: string[];
}

export type LabelSelector = LabelRequirement[];

const KEY_CHARS = /[A-Za-z0-9_.\-/]/;
const VALUE_CHARS = /[A-Za-z0-9_.\-]/;

/** Parses a label selector string; throws a 400 BadRequest ApiError when it is malformed. */
export function parseLabelSelector(input: string | undefined | null): LabelSelector {
  const text = input ?? '';
  const requirements: LabelSelector = [];
  let pos = 0;
  const fail = (why: string): never => {
    throw badRequest(`unable to parse requirement: found '${text.slice(pos, pos + 1) || 'EOF'}', ${why} (in selector "${text}")`);
  };
  const skipSpace = (): void => {
    while (pos < text.length && /\s/.test(text[pos]!)) pos++;
  };
  const readWhile = (re: RegExp): string => {
    const start = pos;
    while (pos < text.length && re.test(text[pos]!)) pos++;
    return text.slice(start, pos);
  };
  skipSpace();
  if (pos >= text.length) return requirements;
  for (;;) {
    skipSpace();
    let negated = false;
    if (text[pos] === '!') {
      negated = true;
      pos++;
      skipSpace();
    }
    const key = readWhile(KEY_CHARS);
    if (!key) fail('expected: identifier');
    validateLabelKeyForSelector(key);
    skipSpace();
    if (negated) {
      requirements.push({ key, op: 'notexists', values: [] });
    } else if (pos >= text.length || text[pos] === ',') {
      requirements.push({ key, op: 'exists', values: [] });
    } else if (text.startsWith('==', pos) || text.startsWith('!=', pos) || text[pos] === '=') {
      let op: LabelOperator = '=';
      if (text.startsWith('!=', pos)) {
        op = '!=';
        pos += 2;
      } else if (text.startsWith('==', pos)) {
        pos += 2;
      } else {
        pos += 1;
      }
      skipSpace();
      const value = readWhile(VALUE_CHARS);
      requirements.push({ key, op, values: [value] });
    } else if (text[pos] === '>' || text[pos] === '<') {
      const op: LabelOperator = text[pos] === '>' ? 'gt' : 'lt';
      pos++;
      skipSpace();
      const value = readWhile(/[0-9\-]/);
      if (!/^-?\d+$/.test(value)) fail('expected an integer value');
      requirements.push({ key, op, values: [value] });
    } else {
      const word = readWhile(/[a-z]/);
      if (word !== 'in' && word !== 'notin') fail("expected: '=', '!=', '==', 'in', 'notin'");
      skipSpace();
      if (text[pos] !== '(') fail("expected: '('");
      pos++;
      const values: string[] = [];
      for (;;) {
        skipSpace();
        const value = readWhile(VALUE_CHARS);
        values.push(value);
        skipSpace();
        if (text[pos] === ',') {
          pos++;
          continue;
        }
        if (text[pos] === ')') {
          pos++;
          break;
        }
        fail("expected: ',' or ')'");
      }
      requirements.push({ key, op: word as LabelOperator, values });
    }
    skipSpace();
    if (pos >= text.length) break;
    if (text[pos] !== ',') fail("expected: ','");
    pos++;
  }
  return requirements;
}

function validateLabelKeyForSelector(key: string): void {
  const parts = key.split('/');
  if (parts.length > 2 || parts.some((p) => p === '')) {
    throw badRequest(`unable to parse requirement: invalid label key "${key}"`);
  }
}

/** Builds a selector from a Service's `spec.selector` map (all pairs must match). */
export function selectorFromMap(map: Record<string, string> | undefined | null): LabelSelector {
  return Object.entries(map ?? {}).map(([key, value]) => ({ key, op: '=' as const, values: [value] }));
}

export function matchLabels(selector: LabelSelector, labels: Record<string, string> | undefined | null): boolean {
  const l = labels ?? {};
  for (const req of selector) {
    const has = Object.prototype.hasOwnProperty.call(l, req.key);
    const value = has ? l[req.key]! : undefined;
    switch (req.op) {
      case 'exists':
        if (!has) return false;
        break;
      case 'notexists':
        if (has) return false;
        break;
      case '=':
        if (!has || value !== req.values[0]) return false;
        break;
      case '!=':
        if (has && value === req.values[0]) return false;
        break;
      case 'in':
        if (!has || !req.values.includes(value!)) return false;
        break;
      case 'notin':
        if (has && req.values.includes(value!)) return false;
        break;
      case 'gt':
      case 'lt': {
        if (!has || !/^-?\d+$/.test(value!)) return false;
        const n = Number(value);
        const bound = Number(req.values[0]);
        if (req.op === 'gt' ? !(n > bound) : !(n < bound)) return false;
        break;
      }
    }
  }
  return true;
}

export interface FieldRequirement {
  field: string;
  op: '=' | '!=';
  value: string;
}

export type FieldSelector = FieldRequirement[];

/** Splits on unescaped commas and parses `field=value`, `field==value`, `field!=value` (backslash escapes). */
export function parseFieldSelector(input: string | undefined | null): FieldSelector {
  const text = input ?? '';
  if (text.trim() === '') return [];
  const parts: string[] = [];
  let current = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === '\\' && i + 1 < text.length) {
      current += c + text[i + 1];
      i++;
    } else if (c === ',') {
      parts.push(current);
      current = '';
    } else {
      current += c;
    }
  }
  parts.push(current);
  return parts.map((part) => {
    const match = /^(.*?)(!=|==|=)(.*)$/s.exec(unescapedSplitPoint(part));
    if (!match) throw badRequest(`invalid selector: '${part}'; can't understand '${part}'`);
    const opIndex = match[1]!.length;
    const field = part.slice(0, opIndex).trim();
    const op = match[2] === '!=' ? '!=' : '=';
    const value = unescapeFieldValue(part.slice(opIndex + match[2]!.length));
    return { field, op, value } as FieldRequirement;
  });
}

/** Replaces escaped characters with placeholders of the same length, so operator positions stay right. */
function unescapedSplitPoint(part: string): string {
  return part.replace(/\\./g, '__');
}

function unescapeFieldValue(value: string): string {
  return value.replace(/\\(.)/g, '$1');
}

/** Checks a field selector against the fields a resource supports, throwing 400 as the apiserver does. */
export function checkFieldSelector(selector: FieldSelector, supported: readonly string[]): void {
  for (const req of selector) {
    if (!supported.includes(req.field)) throw badRequest(`field label not supported: ${req.field}`);
  }
}

export function matchFields(selector: FieldSelector, fields: Record<string, string>): boolean {
  for (const req of selector) {
    const value = fields[req.field] ?? '';
    if (req.op === '=' ? value !== req.value : value === req.value) return false;
  }
  return true;
}

/** The name a single-object field selector (`metadata.name=x`) pins, if any. */
export function pinnedName(selector: FieldSelector): string | undefined {
  return selector.find((r) => r.field === 'metadata.name' && r.op === '=')?.value;
}
