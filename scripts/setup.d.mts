// Types of the parts of scripts/setup.mjs that TypeScript tests import.
export const ROOT: string
export function engineFloor(): {range: string; floor: [number, number, number]}
export function nodeIsSupported(version?: string): boolean
export const JEMALLOC_LIBRARY: string
