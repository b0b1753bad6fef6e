/**
 * `fnr test`'s `.expected/config.yaml`: kpt's TestCaseConfig as kpt's runner decodes it (Go's YAML decoding
 * into typed fields), plus fnr's `timeout`. Keys that are not kpt's (apiVersion, kind, metadata, runCount, a
 * mis-cased key, …) are allowed and ignored, as kpt ignores them. An empty value (null) is the field's zero
 * value. Go reads any scalar into a string field (`image: 123` is "123"), so string fields take any scalar.
 */
import type {Schema} from './validate.js'

/** A Go string field: any scalar, read as its text. */
const text: Schema = {type: ['string', 'number', 'boolean', 'null']}
const flag: Schema = {type: ['boolean', 'null']}
const lines: Schema = {type: ['array', 'null'], items: text}
const regexp: Schema = {...text, format: 'go-regexp'}

export const TEST_CASE_CONFIG: Schema = {
  type: 'object',
  properties: {
    testType: {...text, enum: ['eval', 'render', '', null]},
    exitCode: {type: ['integer', 'null']},
    allowExec: flag,
    skip: flag,
    sequential: flag,
    debug: flag,
    disableOutputTruncate: flag,
    network: flag,
    allowNetwork: flag,
    allowWasm: flag,
    includeMetaResources: flag,
    stdErr: text,
    stdOut: text,
    stdErrRegEx: regexp,
    diffStripRegEx: regexp,
    stdErrStripLines: lines,
    actualStripLines: lines,
    runtimes: lines,
    image: text,
    execPath: text,
    fnConfig: text,
    tag: text,
    // (a scalar that is not a string is no policy either)
    imagePullPolicy: {type: ['string', 'null'], format: 'pull-policy'},
    // fnr's: this case's timeout, a Go duration above 0
    timeout: {type: 'string', format: 'positive-duration'},
    args: {type: ['object', 'null'], additionalProperties: text},
  },
}
