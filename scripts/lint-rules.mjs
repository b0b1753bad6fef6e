// Project rules for ESLint (eslint.config.js), kept apart so that a test can check them (test/lib/typed-decisions.test.ts).

const NOT_ON_MESSAGES = 'branch on a typed field (kind, details, code), not on an error message'
/** Selectors for control flow that reads `.message` text: `x.message.startsWith(…)`, `/re/.test(x.message)`, `x.message === …`. */
export const MESSAGE_MATCHING = [
  {selector: "CallExpression[callee.property.name=/^(startsWith|endsWith|includes|match|matchAll|search|indexOf)$/][callee.object.property.name='message']", message: NOT_ON_MESSAGES},
  {selector: "CallExpression[callee.property.name=/^(test|exec)$/] > MemberExpression.arguments[property.name='message']", message: NOT_ON_MESSAGES},
  {selector: "BinaryExpression[operator=/^[!=]==?$/] > MemberExpression[property.name='message']", message: NOT_ON_MESSAGES},
]
