// Types of scripts/porch-peers.mjs (plain ESM, used by the porch-server suite).
export declare const PORCH_SERVER_TARGETS: Array<{pkg: string; out: string}>
export declare function buildPorchServer(options?: {log?: (m: string) => void}): {porch: string; porchctl: string}
export declare const PORCH_E2E_PKG: string
export declare function buildPorchE2e(options?: {log?: (m: string) => void}): {test: string; test2json: string}
