/**
 * Name and label validation with the messages of k8s.io/apimachinery/pkg/util/validation.
 */
import type { FieldError } from './status.js';

function regexError(msg: string, fmt: string, examples: string[]): string {
  let out = `${msg} (e.g. `;
  examples.forEach((example, i) => {
    if (i > 0) out += ' or ';
    out += `'${example}', `;
  });
  return `${out}regex used for validation is '${fmt}')`;
}

const DNS1123_LABEL_FMT = '[a-z0-9]([-a-z0-9]*[a-z0-9])?';
const DNS1123_SUBDOMAIN_FMT = `${DNS1123_LABEL_FMT}(\\.${DNS1123_LABEL_FMT})*`;
const DNS1035_LABEL_FMT = '[a-z]([-a-z0-9]*[a-z0-9])?';
const QUALIFIED_NAME_FMT = '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]';
const LABEL_VALUE_FMT = `(${QUALIFIED_NAME_FMT})?`;

const DNS1123_LABEL_RE = new RegExp(`^${DNS1123_LABEL_FMT}$`);
const DNS1123_SUBDOMAIN_RE = new RegExp(`^${DNS1123_SUBDOMAIN_FMT}$`);
const DNS1035_LABEL_RE = new RegExp(`^${DNS1035_LABEL_FMT}$`);
const QUALIFIED_NAME_RE = new RegExp(`^${QUALIFIED_NAME_FMT}$`);
const LABEL_VALUE_RE = new RegExp(`^${LABEL_VALUE_FMT}$`);

const maxLen = (n: number): string => `must be no more than ${n} characters`;

/** Returns the problems with a value (empty when valid), like validation.IsDNS1123Subdomain. */
export function isDns1123Subdomain(value: string): string[] {
  const errs: string[] = [];
  if (value.length > 253) errs.push(maxLen(253));
  if (!DNS1123_SUBDOMAIN_RE.test(value)) {
    errs.push(
      regexError(
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
        DNS1123_SUBDOMAIN_FMT,
        ['example.com'],
      ),
    );
  }
  return errs;
}

export function isDns1123Label(value: string): string[] {
  const errs: string[] = [];
  if (value.length > 63) errs.push(maxLen(63));
  if (!DNS1123_LABEL_RE.test(value)) {
    errs.push(
      regexError(
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
        DNS1123_LABEL_FMT,
        ['my-name', '123-abc'],
      ),
    );
  }
  return errs;
}

export function isDns1035Label(value: string): string[] {
  const errs: string[] = [];
  if (value.length > 63) errs.push(maxLen(63));
  if (!DNS1035_LABEL_RE.test(value)) {
    errs.push(
      regexError(
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
        DNS1035_LABEL_FMT,
        ['my-name', 'abc-123'],
      ),
    );
  }
  return errs;
}

export function isQualifiedName(value: string): string[] {
  const errs: string[] = [];
  const parts = value.split('/');
  let name: string;
  if (parts.length === 1) {
    name = parts[0]!;
  } else if (parts.length === 2) {
    const prefix = parts[0]!;
    name = parts[1]!;
    if (prefix.length === 0) errs.push('prefix part must be non-empty');
    else for (const e of isDns1123Subdomain(prefix)) errs.push(`prefix part ${e}`);
  } else {
    return [
      regexError(
        "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
        QUALIFIED_NAME_FMT,
        ['MyName', 'my.name', '123-abc'],
      ) + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
    ];
  }
  if (name.length === 0) errs.push('name part must be non-empty');
  else if (name.length > 63) errs.push(`name part ${maxLen(63)}`);
  if (name.length > 0 && !QUALIFIED_NAME_RE.test(name)) {
    errs.push(
      `name part ${regexError(
        "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
        QUALIFIED_NAME_FMT,
        ['MyName', 'my.name', '123-abc'],
      )}`,
    );
  }
  return errs;
}

export function isValidLabelValue(value: string): string[] {
  const errs: string[] = [];
  if (value.length > 63) errs.push(maxLen(63));
  if (!LABEL_VALUE_RE.test(value)) {
    errs.push(
      regexError(
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
        LABEL_VALUE_FMT,
        ['MyValue', 'my_value', '12345'],
      ),
    );
  }
  return errs;
}

export type NameRule = 'subdomain' | 'label' | 'dns1035';

export function validateName(rule: NameRule, name: string, field = 'metadata.name'): FieldError[] {
  const problems = rule === 'subdomain' ? isDns1123Subdomain(name) : rule === 'label' ? isDns1123Label(name) : isDns1035Label(name);
  return problems.map((detail) => ({ type: 'FieldValueInvalid', field, value: name, detail }));
}

export function validateLabels(labels: unknown, field = 'metadata.labels'): FieldError[] {
  if (labels === undefined || labels === null) return [];
  if (typeof labels !== 'object' || Array.isArray(labels)) {
    return [{ type: 'FieldValueInvalid', field, value: labels, detail: 'must be a map of string keys to string values' }];
  }
  const errs: FieldError[] = [];
  for (const [key, value] of Object.entries(labels as Record<string, unknown>)) {
    for (const detail of isQualifiedName(key)) errs.push({ type: 'FieldValueInvalid', field, value: key, detail });
    if (typeof value !== 'string') {
      errs.push({ type: 'FieldValueInvalid', field, value, detail: 'label values must be strings' });
      continue;
    }
    for (const detail of isValidLabelValue(value)) errs.push({ type: 'FieldValueInvalid', field, value, detail });
  }
  return errs;
}

export function validateAnnotations(annotations: unknown, field = 'metadata.annotations'): FieldError[] {
  if (annotations === undefined || annotations === null) return [];
  if (typeof annotations !== 'object' || Array.isArray(annotations)) {
    return [{ type: 'FieldValueInvalid', field, value: annotations, detail: 'must be a map of string keys to string values' }];
  }
  const errs: FieldError[] = [];
  let total = 0;
  for (const [key, value] of Object.entries(annotations as Record<string, unknown>)) {
    for (const detail of isQualifiedName(key.toLowerCase())) errs.push({ type: 'FieldValueInvalid', field, value: key, detail });
    if (typeof value !== 'string') errs.push({ type: 'FieldValueInvalid', field, value, detail: 'annotation values must be strings' });
    else total += key.length + value.length;
  }
  if (total > 256 * 1024) errs.push({ type: 'FieldValueTooLong', field, detail: 'may not be more than 262144 bytes' });
  return errs;
}
