// Types of scripts/kpt-e2e.mjs for the TypeScript tests.
export const KPT_MODULE: string
export const KPT_E2E_VERSION: string
export const KPT_E2E_SUITES: string[]
export const KPT_E2E_DIR: string
export function kptE2eFetched(dir?: string): boolean
export function fetchKptE2e(options?: {dir?: string; log?: (message: string) => void}): string
