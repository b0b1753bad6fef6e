/** The categories of the cases fnr fails where kpt passes (report.ts, known-failures.ts). */
export const FORM = 'exit code / Error: form'
export const FLAGS = "kpt's command line (flags, DIR defaults to .)"
export const SOURCE_SINK = 'kpt fn source / kpt fn sink (not in fnr)'
export const YAML_MESSAGE = "the YAML parser's own words for a syntax error (Go's yaml.v3 and fnr's parser differ)"
