// `oclif manifest` writes the commands in the order it happened to load them, which changes from
// one build to the next; sorted by command id, the committed manifest only changes when a command
// or a flag does.
import {readFileSync, writeFileSync} from 'node:fs'

const file = new URL('../oclif.manifest.json', import.meta.url)
const manifest = JSON.parse(readFileSync(file, 'utf8'))
manifest.commands = Object.fromEntries(Object.entries(manifest.commands).sort(([a], [b]) => a.localeCompare(b)))
writeFileSync(file, `${JSON.stringify(manifest, null, 2)}\n`)
