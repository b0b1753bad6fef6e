import {Args} from '@oclif/core'

import {FnrCommand} from '../../cli/command.js'
import {oclifFlags} from '../../cli/flags.js'
import type {ImageMetadata} from '../../lib/registry/client.js'

export default class Inspect extends FnrCommand {
  static summary = 'Show what fnr would run for a function image: digest, platform, entrypoint and the wrapper command.'

  static description = `Resolves IMAGE in its registry the way the pod runtime does: all four manifest types are accepted, an index is resolved to --platform, and the config blob gives Entrypoint and Cmd. The function command is Entrypoint followed by Cmd (as a container runtime runs them), or whichever of the two is set; an image with neither is an error.

Credentials come from --auth-file (a docker config JSON), else $REGISTRY_AUTH_FILE, else $DOCKER_CONFIG/config.json, else ~/.docker/config.json (where docker login writes; credsStore and credHelpers run the docker-credential-* helpers); without any, access is anonymous. --ca-file adds a CA to the system roots. A registry listed with --insecure-registry is reached without certificate checks, or over plain HTTP when it does not speak TLS; no other registry ever is.

Exit codes: 2 bad reference or flags, 3 bad auth/CA file, untrusted certificate or unusable image, 4 image or platform not found, 5 authentication or permission refused, 6 timeout, 8 registry unreachable or failing.`

  static examples = [
    '<%= config.bin %> <%= command.id %> ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.2.2',
    {description: 'Another platform, as JSON:', command: '<%= config.bin %> <%= command.id %> --platform linux/arm64 --json ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.2.2'},
    {
      description: 'A private registry with its own CA:',
      command: '<%= config.bin %> <%= command.id %> --auth-file ~/.docker/config.json --ca-file ca.crt registry.example.com:5443/fn/my-fn:v1',
    },
    {description: 'A local registry over plain HTTP:', command: '<%= config.bin %> <%= command.id %> --insecure-registry 127.0.0.1:5000 127.0.0.1:5000/fn/my-fn:v1'},
  ]

  static args = {
    image: Args.string({description: 'Image reference (short Docker Hub names, ports, tags and digests all work).', required: true, ignoreStdin: true}),
  }

  static flags = oclifFlags({
    json: {kind: 'boolean', summary: 'Print the result as JSON.', default: false},
    'auth-file': {kind: 'string', summary: 'Docker config JSON with registry credentials (default: $REGISTRY_AUTH_FILE, else $DOCKER_CONFIG/config.json, else ~/.docker/config.json).'},
    'ca-file': {kind: 'string', summary: 'PEM file of CA certificates to trust in addition to the system roots (repeatable).', multiple: true, multipleNonGreedy: true},
    'insecure-registry': {kind: 'string', summary: 'Registry host[:port] reachable without TLS verification or over plain HTTP (repeatable).', multiple: true, multipleNonGreedy: true},
    platform: {kind: 'string', summary: 'Platform to pick from a multi-platform image (os/arch[/variant]).', default: 'linux/amd64'},
    timeout: {kind: 'duration', summary: 'Overall time limit, e.g. 30s or 2m.', default: 60_000, defaultHelp: '1m'},
  })

  async run(): Promise<void> {
    const {args, flags} = await this.parse(Inspect)
    const registry = await import('../../lib/registry/index.js')
    const authFile = flags['auth-file'] ?? registry.defaultAuthFile()
    let dockerConfig = registry.DockerConfig.empty()
    if (flags['auth-file'] !== undefined) dockerConfig = await registry.DockerConfig.load(flags['auth-file'])
    else if (authFile !== undefined && (await fileExists(authFile))) dockerConfig = await registry.DockerConfig.load(authFile)
    const caCertificates = await Promise.all((flags['ca-file'] ?? []).map((f) => registry.loadCaFile(f)))
    const platform = registry.parsePlatform(flags.platform)

    const client = new registry.RegistryClient({
      dockerConfig,
      caCertificates,
      insecureRegistries: flags['insecure-registry'] ?? [],
      platform,
      requestTimeoutMs: flags.timeout,
    })
    try {
      const meta = await client.inspect(args.image, {signal: AbortSignal.timeout(flags.timeout)})
      const wrapperArgs = registry.wrapperServerArgs(meta.command)
      if (flags.json) {
        const out = {...meta, wrapper: {command: [registry.WRAPPER_SERVER_PATH], args: wrapperArgs}}
        process.stdout.write(`${JSON.stringify(out, null, 2)}\n`)
      } else {
        process.stdout.write(renderText(meta, [registry.WRAPPER_SERVER_PATH, ...wrapperArgs], registry.shellQuote, registry.formatPlatform))
      }
    } finally {
      client.close()
    }
  }
}

async function fileExists(file: string): Promise<boolean> {
  const {access} = await import('node:fs/promises')
  return access(file).then(
    () => true,
    () => false,
  )
}

function renderText(
  meta: ImageMetadata,
  wrapper: string[],
  quote: (argv: readonly string[]) => string,
  platform: (p: ImageMetadata['platform']) => string,
): string {
  const rows: Array<[string, string]> = [
    ['Image', meta.image],
    ['Reference', meta.reference],
    ['Digest', meta.digest],
    ['Media type', meta.mediaType],
  ]
  if (meta.index !== undefined) rows.push(['Index', `${meta.index.digest} (${meta.index.mediaType}; ${meta.index.platforms.join(', ')})`])
  rows.push(
    ['Pinned', meta.pinnedReference],
    ['Platform', platform(meta.platform)],
    ['Entrypoint', meta.entrypoint.length > 0 ? JSON.stringify(meta.entrypoint) : '(none)'],
    ['Cmd', meta.cmd.length > 0 ? JSON.stringify(meta.cmd) : '(none)'],
    ['Size', `${formatBytes(meta.size)} (config and ${meta.layers} compressed ${meta.layers === 1 ? 'layer' : 'layers'})`],
  )
  if (meta.created !== undefined) rows.push(['Created', meta.created])
  rows.push(['Command', quote(meta.command)], ['Wrapper', quote(wrapper)])
  const width = Math.max(...rows.map(([k]) => k.length)) + 2
  return rows.map(([k, v]) => `${`${k}:`.padEnd(width)}${v}\n`).join('')
}

function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`
  const units = ['KiB', 'MiB', 'GiB']
  let v = n
  let u = -1
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024
    u++
  }
  return `${v.toFixed(1)} ${units[u]} (${n} bytes)`
}
