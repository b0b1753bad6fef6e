/** The categories of the cases fnr fails where kpt passes (report.ts, known-failures.ts). */
export const FORM = 'exit code / Error: form'
export const FLAGS = "kpt's command line (flags, DIR defaults to .)"
export const UNMAPPED_KPT = "a kpt command fnr test's kpt does not map (kpt pkg, kpt live, …)"
