// Types of scripts/catalog-peers.mjs for the TypeScript tests and benchmarks.
export interface CatalogFunction {
  name: string
  module: string
  version: string
  wanted: string
}
interface BuildOptions {
  log?: (message: string) => void
}
export const CATALOG: CatalogFunction[]
export const MISSING: Array<{name: string; wanted: string}>
export const CATALOG_FUNCTIONS_DIR: string
export function buildCatalogFunctions(options?: BuildOptions): string
export function buildPorchRunner(options?: BuildOptions): {server: string; wrapperServer: string}
export function buildGoClient(options?: BuildOptions): string
export function buildPorchClient(options?: BuildOptions): string
