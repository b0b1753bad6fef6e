#!/usr/bin/env -S node --import tsx
// Runs a command straight from its TypeScript source (src/commands/…, through tsx), without a
// build: `bin/dev.js serve --port 0`, `bin/dev.js image inspect IMG`. Help and anything that is
// not a command (`bin/dev.js --help`) go to oclif as bin/run.js does.
import {existsSync} from 'node:fs'
import path from 'node:path'
import {fileURLToPath} from 'node:url'

import {execute, handle} from '@oclif/core'

const root = fileURLToPath(new URL('..', import.meta.url))
const args = process.argv.slice(2)
let file
let used = 0
for (let n = 1; n <= args.length && !args[n - 1].startsWith('-'); n++) {
  const candidate = path.join(root, 'src', 'commands', ...args.slice(0, n)) + '.ts'
  if (existsSync(candidate)) {
    file = candidate
    used = n
  }
}
if (file) {
  const {default: command} = await import(file)
  const rest = args.slice(used)
  const flagArgs = rest.includes('--') ? rest.slice(0, rest.indexOf('--')) : rest
  // Help is rendered by oclif from the built command (npm run build).
  if (flagArgs.includes('--help') || flagArgs.includes('-h')) await execute({dir: import.meta.url})
  else await command.run(rest, root).catch(handle)
} else {
  await execute({development: true, dir: import.meta.url})
}
