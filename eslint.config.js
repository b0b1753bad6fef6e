// ESLint flat config: `npm run lint` runs tsc (types) and then ESLint (this file).
//
// - TypeScript (src/, test/, bench/, scripts/*.ts) is linted with type information, so the rules
//   that catch unawaited promises work: no-floating-promises, no-misused-promises, await-thenable.
// - src/ also has size and complexity limits (one function, one job). Test files are exempt from
//   them: a mocha describe() callback is a list of cases, not a function to split.
// - Violations that predate a rule are frozen in eslint-suppressions.json (ESLint's bulk
//   suppressions): they do not fail the lint, new ones do. When you fix some, shrink the file with
//   `npx eslint --prune-suppressions`; never add to it by hand (`--suppress-rule` exists for a
//   deliberate, reviewed freeze).
import js from '@eslint/js'
import tseslint from 'typescript-eslint'

import {MESSAGE_MATCHING} from './scripts/lint-rules.mjs'

export default tseslint.config(
  {
    ignores: ['dist/**', 'node_modules/**', 'build/**', '.cache/**', 'tmp/**', 'bench/results/**', 'oclif.manifest.json', 'test/peers/**'],
  },
  js.configs.recommended,
  {
    linterOptions: {reportUnusedDisableDirectives: 'error'},
    rules: {
      // `catch {}` and `.catch(() => {})` are how this code says "a failure here is expected and harmless"
      'no-empty': ['error', {allowEmptyCatch: true}],
    },
  },
  {
    files: ['**/*.{js,mjs,cjs}'],
    languageOptions: {
      ecmaVersion: 2023,
      sourceType: 'module',
      globals: {
        process: 'readonly', console: 'readonly', Buffer: 'readonly', URL: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly',
        setInterval: 'readonly', clearInterval: 'readonly', setImmediate: 'readonly', AbortController: 'readonly', AbortSignal: 'readonly',
        fetch: 'readonly', TextDecoder: 'readonly', TextEncoder: 'readonly', performance: 'readonly', structuredClone: 'readonly',
        queueMicrotask: 'readonly',
      },
    },
  },
  {
    files: ['**/*.cjs'],
    languageOptions: {sourceType: 'commonjs', globals: {require: 'readonly', module: 'writable'}},
  },
  {
    files: ['**/*.ts'],
    extends: [tseslint.configs.recommended],
    languageOptions: {
      parserOptions: {projectService: true, tsconfigRootDir: import.meta.dirname},
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
      '@typescript-eslint/no-unused-vars': ['error', {argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none'}],
      '@typescript-eslint/no-empty-function': 'off',
    },
  },
  {
    // chai's property assertions (`expect(x).to.be.true`, `.and.not.NaN`) are expressions by design
    files: ['test/**/*.ts'],
    rules: {'@typescript-eslint/no-unused-expressions': 'off'},
  },
  {
    files: ['src/**/*.ts'],
    rules: {
      complexity: ['error', 15],
      'max-statements': ['error', 30],
      'max-params': ['error', 4],
      'max-lines-per-function': ['error', {max: 80, skipBlankLines: true, skipComments: true}],
      'max-depth': ['error', 4],
      // Decisions read a typed field of the error (FnrError.kind, FnrError.details, an errno `code`),
      // never its message: a reworded message must not change what the code does (docs/architecture.md).
      'no-restricted-syntax': ['error', ...MESSAGE_MATCHING],
    },
  },
)
