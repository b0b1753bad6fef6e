/**
 * Sorted-key JSON: equal objects give equal text whatever their key order (undefined members
 * dropped, as JSON.stringify drops them), so hashes of it are stable. The template version
 * (pods/model/template.ts) and FunctionConfig override versions (function-config-crd.ts) hash it.
 */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined)
    entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`
  }
  return JSON.stringify(value)
}
