import {Args} from '@oclif/core'

import {FnrCommand} from '../../cli/command.js'
import {oclifFlags} from '../../cli/flags.js'
import type {ImageInspection} from '../../lib/registry/inspect.js'

export default class Inspect extends FnrCommand {
  static summary = 'Show what fnr would run for a function image: digest, platform, entrypoint and the wrapper command.'

  static description = `Resolves IMAGE in its registry the way the pod runtime does: all four manifest types are accepted, an index is resolved to --platform, and the config blob gives Entrypoint and Cmd. The function command is Entrypoint followed by Cmd (as a container runtime runs them), or whichever of the two is set; an image with neither is an error.

Credentials come from --auth-file (a docker config JSON), else $REGISTRY_AUTH_FILE, else $DOCKER_CONFIG/config.json, else ~/.docker/config.json (where docker login writes; credsStore and credHelpers run the docker-credential-* helpers); without any, access is anonymous. --ca-file adds a CA to the system roots. A registry listed with --insecure-registry is reached without certificate checks, or over plain HTTP when it does not speak TLS; no other registry ever is.

--json prints the same facts as one JSON object: {image, reference, registry, repository, tag?, digest, mediaType, index?, pinnedReference, platform, configDigest, entrypoint, cmd, command, size, layers, created?, wrapper: {command, args}}; a failure is {"error": {kind, message, exitCode}} on stdout, with the same exit code.

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

  static enableJsonFlag = true

  static flags = oclifFlags({
    'auth-file': {kind: 'string', summary: 'Docker config JSON with registry credentials (default: $REGISTRY_AUTH_FILE, else $DOCKER_CONFIG/config.json, else ~/.docker/config.json).'},
    'ca-file': {kind: 'string', summary: 'PEM file of CA certificates to trust in addition to the system roots (repeatable).', multiple: true, multipleNonGreedy: true},
    'insecure-registry': {kind: 'string', summary: 'Registry host[:port] reachable without TLS verification or over plain HTTP (repeatable).', multiple: true, multipleNonGreedy: true},
    platform: {kind: 'string', summary: 'Platform to pick from a multi-platform image (os/arch[/variant]).', default: 'linux/amd64'},
    timeout: {kind: 'duration', summary: 'Overall time limit, e.g. 30s or 2m.', default: 60_000, defaultHelp: '1m'},
  })

  async run(): Promise<ImageInspection> {
    const {args, flags} = await this.parse(Inspect)
    const {inspectImage, formatImageInspection} = await import('../../lib/registry/index.js')
    const inspection = await inspectImage({
      image: args.image,
      authFile: flags['auth-file'],
      caFiles: flags['ca-file'] ?? [],
      insecureRegistries: flags['insecure-registry'] ?? [],
      platform: flags.platform,
      timeoutMs: flags.timeout,
    })
    if (!this.jsonEnabled()) process.stdout.write(formatImageInspection(inspection))
    return inspection
  }
}
