import {existsSync} from 'node:fs'

import {FnrCommand} from '../../cli/command.js'
import {clusterFlags, oclifFlag, oclifFlags, podFlags, registryFlags, runnerTemplateFlags} from '../../cli/flags.js'
import {FnrError} from '../../lib/errors.js'
import {registrySettings, runnerTemplateSettings} from '../../lib/flags/runner-flag-specs.js'
import type {WarmSummary} from '../../lib/pods/admin/warm.js'

export default class PodsWarm extends FnrCommand {
  static summary = 'Create a ready function pod for each image of a pod-cache-config file and/or --image, as the runner would.'

  static description = `Builds each pod with the runner's own code (template, names, labels, annotations, pull Secret), from the runner's current template: the --function-pod-template ConfigMap in the runner's namespace, else the inline template made from --wrapper-server-image ($WRAPPER_SERVER_IMAGE), --pod-requests, --pod-limits and --max-request-body-size. Pass the same values as the runner's, or the runner will not adopt the pods (the template version must match; \`fnr pods ls\` shows it). FunctionConfigs (a runner with --function-config-source=crd|both) are not read.

Idempotent: an image that already has a ready fnr pod of the current template version gets nothing new, and one whose pod is starting is waited for. A pod that does not become ready within --pod-ready-timeout (or --timeout) is deleted again and the image reported as failed; the other images go on. The entrypoint of each image comes from its registry (--enable-private-registries and the other registry flags as for \`fnr serve\`; the pull Secret is created when missing and never changed, as it is the runner's), so an image that does not exist fails for that image only.

The pods carry the owner "fnr-pods-warm", which no runner has: a runner that starts afterwards adopts them (it adopts every ready pod of its template version and takes ownership) and uses them instead of creating pods; a runner already running adopts them too (when its pod watch sees one ready, else at its next GC pass) when they are of its template version and the image is below its pod limit, and collects one it cannot use once idle past its TTL (fnr.dev/ttl-seconds: the image's timeToLive in --pod-cache-config, else --pod-ttl) and its grace period. \`fnr pods gc\` applies the TTL to them (their owner holds no Lease).

Progress goes to stderr (listr2 on a terminal, one line per image otherwise); stdout gets one line per image, or with --json {"namespace", "templateVersion", "template", "images": [{image, ok, pod, action: created|existing|waited|none, error, ms}], "ready", "failed", "created"}. Exit code 1 when any image failed; with --json the summary then also has "error": {kind, message, exitCode}, and any other failure is {"error": …} alone, with the same exit code as without --json.`

  static examples = [
    {description: 'Warm the runner\'s warm-up list (inline template):', command: 'WRAPPER_SERVER_IMAGE=ghcr.io/kptdev/porch/wrapper-server:v4 <%= config.bin %> <%= command.id %> --pod-cache-config pod-cache-config.yaml'},
    {description: 'Two images, with the runner\'s template ConfigMap, as JSON:', command: '<%= config.bin %> <%= command.id %> --image ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.2.2 --image ghcr.io/kptdev/krm-functions-catalog/starlark:v0.4.3 --function-pod-template kpt-function-eval-pod-template --runner-namespace porch-system --json'},
    {description: 'Private registry, as the runner is set up:', command: '<%= config.bin %> <%= command.id %> --pod-cache-config pods.yaml --enable-private-registries --registry-auth-secret-path ~/.docker/config.json --timeout 5m'},
  ]

  static enableJsonFlag = true

  static flags = {
    image: oclifFlag({kind: 'string', summary: 'A function image to warm (repeatable), as callers request it.', multiple: true}),
    'pod-cache-config': podFlags['pod-cache-config'],
    'pod-ttl': podFlags['pod-ttl'],
    'pod-ready-timeout': podFlags['pod-ready-timeout'],
    ...oclifFlags({
      timeout: {kind: 'duration', summary: 'Give up on images not ready by then (default: only --pod-ready-timeout per pod).'},
      'pin-image-digests': {kind: 'string', summary: 'Run function containers as repo@digest (the digest the registry resolved), as a runner with --pin-image-digests does; the fnr.dev/image-digest annotation is written either way.', default: 'true', options: ['true', 'false']},
    }),
    ...runnerTemplateFlags,
    ...registryFlags,
    ...clusterFlags,
  }

  async run(): Promise<WarmSummary> {
    const {flags, metadata} = await this.parse(PodsWarm)
    this.verbosity = flags['log-level']
    // The default file is used when it exists (e.g. inside the runner's pod); a file named on the command line must exist.
    const configPath = flags['pod-cache-config']
    const cacheConfigPath = metadata.flags['pod-cache-config']?.setFromDefault ? (existsSync(configPath) ? configPath : undefined) : configPath
    if (flags['pod-ready-timeout'] <= 0) throw new FnrError('Usage', '--pod-ready-timeout must be a positive duration')
    if (flags['pod-ttl'] <= 0) throw new FnrError('Usage', '--pod-ttl must be a positive duration')
    if (flags.timeout !== undefined && flags.timeout <= 0) throw new FnrError('Usage', '--timeout must be a positive duration')
    if (flags['enable-private-registries-tls'] && !flags['enable-private-registries']) throw new FnrError('Usage', '--enable-private-registries-tls needs --enable-private-registries=true')
    const [{warmPods, warmFailure, warmLine}, {runWithProgress}, {createLogger}] = await Promise.all([import('../../lib/pods/admin/warm.js'), import('../../cli/progress.js'), import('../../lib/telemetry/log.js')])
    const summary = await warmPods({
      namespace: flags.namespace,
      kube: {kubeconfig: flags.kubeconfig, context: flags.context},
      images: flags.image ?? [],
      cacheConfigPath,
      template: runnerTemplateSettings(flags),
      ttlMs: flags['pod-ttl'],
      podReadyTimeoutMs: flags['pod-ready-timeout'],
      timeoutMs: flags.timeout,
      pinImageDigests: flags['pin-image-digests'] === 'true',
      registry: registrySettings(flags),
      run: (tasks) => runWithProgress(tasks),
      logger: createLogger({verbosity: flags['log-level'], name: 'fnr-pods-warm'}),
    })
    if (!this.jsonEnabled()) process.stdout.write(summary.images.map((r) => `${warmLine(r)}\n`).join(''))
    const failure = warmFailure(summary)
    if (failure) throw failure
    return summary
  }
}
