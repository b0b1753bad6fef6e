// Types of scripts/catalog-peers.mjs for the TypeScript tests and benchmarks.
export interface CatalogFunction {
  name: string
  /** Which source answers: the module through the module proxy, or the catalog's source at CATALOG_SOURCE_COMMIT. */
  source: 'module-proxy' | 'catalog-source'
  module: string
  /** The module version built, or `src-<commit>` for the catalog's source. */
  version: string
  /** The version Porch ships. */
  wanted: string
  /** The SDK import path is rewritten to github.com/kptdev/krm-functions-sdk/go/fn before building. */
  sdkRewrite?: boolean
}
interface BuildOptions {
  log?: (message: string) => void
}
export const CATALOG: CatalogFunction[]
export const MISSING: Array<{name: string; wanted: string}>
export const CATALOG_SOURCE: string
export const CATALOG_SOURCE_COMMIT: string
export const CATALOG_FUNCTIONS_DIR: string
export function rewriteSdk(dir: string): void
export function buildFromCatalogSource(fns: CatalogFunction[], options?: BuildOptions): void
export function buildCatalogFunctions(options?: BuildOptions): string
export function buildPorchRunner(options?: BuildOptions): {server: string; wrapperServer: string}
/** grpc-ecosystem's grpc-health-probe (test/peers/grpc-health-probe); returns its path. */
export function buildHealthProbe(options?: BuildOptions): string
export function buildGoClient(options?: BuildOptions): string
export function buildPorchClient(options?: BuildOptions): string
