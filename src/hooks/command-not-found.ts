/**
 * oclif's command_not_found hook: what fnr does with words that name no command, in fnr's own
 * error format (render-error.ts: one "fnr: …" line, exit 2) instead of oclif's "› Error: command
 * pods:ls:extra-arg not found".
 *   - Words after a command (`fnr pods ls extra-arg`; with spaces as the topic separator oclif
 *     folds them into the id): the command runs with them as arguments, so its own parser rejects
 *     them as unexpected arguments (a Usage error, FnrCommand) or takes them.
 *   - Anything else (`fnr pods bogus`, `fnr bogus`): a Usage error naming the commands there are.
 * No heavy imports: this runs before any command is loaded.
 */
import type {Hook} from '@oclif/core'

import {renderError} from '../cli/render-error.js'
import {closest} from '../lib/flags/suggest.js'
import {FnrError} from '../lib/errors.js'

const hook: Hook.CommandNotFound = async function ({id, argv, config}) {
  const words = id.split(':')
  for (let n = words.length - 1; n > 0; n--) {
    const command = words.slice(0, n).join(':')
    if (config.findCommand(command)) return config.runCommand(command, [...words.slice(n), ...(argv ?? [])])
  }
  // The deepest topic the words name, and what it has.
  let depth = words.length - 1
  while (depth > 0 && !config.findTopic(words.slice(0, depth).join(':'))) depth--
  const prefix = words.slice(0, depth)
  const children = new Set<string>()
  for (const c of config.commands) {
    if (c.hidden) continue
    const parts = c.id.split(':')
    if (parts.length > prefix.length && prefix.every((w, i) => parts[i] === w)) children.add(parts[prefix.length]!)
  }
  const where = [config.bin, ...prefix].join(' ')
  const guess = closest(words[prefix.length] ?? '', children)
  const message = `unknown command "${[config.bin, ...words].join(' ')}"${guess ? `; did you mean "${[where, guess].join(' ')}"?` : ''}; ${where} has ${[...children].sort().join(', ')}`
  process.exitCode = renderError(new FnrError('Usage', message))
}

export default hook
