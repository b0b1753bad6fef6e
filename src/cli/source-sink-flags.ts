/**
 * `fnr source` and `fnr sink`'s flags (kpt fn source and sink's), as plain specs shared by the
 * oclif commands (help, manifest) and the oclif-free fast path in bin/run.js (fast-source-sink.ts).
 */
import type {FlagSpecs} from '../lib/flags/spec.js'
import {EXIT_CODES_SPEC} from './eval-flags.js'

export const SOURCE_FLAG_SPECS = {
  // The value is checked by the command (kpt's words for a bad one), not by the parser.
  output: {kind: 'string', char: 'o', default: 'stdout', summary: 'stdout: a wrapped ResourceList, with the path and index annotations (what fnr eval - and fnr sink read). unwrap: plain YAML documents, without them.'},
  'fn-config': {kind: 'string', summary: 'A file holding one object, added as the ResourceList\'s functionConfig (with stdout).'},
  'exit-codes': EXIT_CODES_SPEC,
} satisfies FlagSpecs

export const SINK_FLAG_SPECS = {
  'exit-codes': EXIT_CODES_SPEC,
} satisfies FlagSpecs
