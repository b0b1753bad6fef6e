/**
 * Runs `fnr image inspect` from source in a child process (tests spawn it with `node --import tsx`),
 * without needing dist/ or a regenerated oclif.manifest.json.
 */
import path from 'node:path'
import {fileURLToPath} from 'node:url'

import Inspect from '../../../src/commands/image/inspect.js'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..')
await Inspect.run(process.argv.slice(2), root)
