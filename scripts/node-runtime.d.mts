// Types of scripts/node-runtime.mjs for the TypeScript that imports it (bench/node-versions.ts).
export const CACHE_DIR: string
export const NODE_MAIN: string
export const NODE_OTHERS: string[]
export function pinnedVersion(spec?: string): string
export function binDir(version: string): string
export function nodeBinary(spec?: string): string
export function pathWith(binary: string, current?: string): string
