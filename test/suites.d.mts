// Types of test/suites.mjs (plain JavaScript, as scripts/test.mjs reads it without a TypeScript loader).
export declare const UNIT: string[]
export declare const ALL: string
export declare const PEER_SUITES: string[]
export declare const CONTROL_PLANE_SPECS: string[]
export declare const OTHER_LANE_SPECS: string[]
export declare const PEER_SPECS: string[]
export declare function mochaSelection(set: 'all' | 'unit' | 'integration'): string[]
export declare const OPT_IN_SUITES: string[]
export declare const PEER_LANE_FOLDERS: string[]
export declare function mochaLanes(set: 'all' | 'integration'): Array<{name: string; args: string[]; nice?: number}>
