/**
 * External programs the registry tests need. A missing one fails the suite with the Debian package
 * to install (CI installs them); tests never skip silently.
 */
import {accessSync, constants} from 'node:fs'
import net from 'node:net'
import path from 'node:path'

export const TOOLS = {
  'docker-registry': 'docker-registry',
  skopeo: 'skopeo',
  openssl: 'openssl',
  htpasswd: 'apache2-utils',
} as const

export type Tool = keyof typeof TOOLS

export function findOnPath(binary: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (dir === '') continue
    const candidate = path.join(dir, binary)
    try {
      accessSync(candidate, constants.X_OK)
      return candidate
    } catch {
      // not here
    }
  }
  return undefined
}

/** The path of a tool, or an Error telling which package provides it. */
export function requireTool(tool: Tool): string {
  const found = findOnPath(tool)
  if (found === undefined) {
    throw new Error(`${tool} is not installed (not found on PATH); the registry tests need it: apt-get install -y --no-install-recommends ${TOOLS[tool]}`)
  }
  return found
}

/** Checks every tool at once, so the message lists all that are missing. */
export function requireTools(...tools: Tool[]): void {
  const missing = tools.filter((t) => findOnPath(t) === undefined)
  if (missing.length > 0) {
    const packages = [...new Set(missing.map((t) => TOOLS[t]))].join(' ')
    throw new Error(`missing ${missing.join(', ')} on PATH; the registry tests need them: apt-get install -y --no-install-recommends ${packages}`)
  }
}

/** A port that was free on 127.0.0.1 a moment ago. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer()
    server.unref()
    server.on('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const {port} = server.address() as net.AddressInfo
      server.close(() => resolve(port))
    })
  })
}
