/** One no-restricted-syntax entry. */
export interface RestrictedSyntax {
  selector: string
  message: string
}
/** Selectors for control flow that reads an error's `.message` text. */
export const MESSAGE_MATCHING: RestrictedSyntax[]
