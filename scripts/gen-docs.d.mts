// Types of scripts/gen-docs.mjs (plain JavaScript, run by node without a TypeScript loader).
export declare const COMMANDS_DOC: string
export declare function renderCommandsDoc(manifest: {commands: Record<string, unknown>}): string
export declare function anchor(text: string): string
export declare function readManifest(): {commands: Record<string, unknown>}
