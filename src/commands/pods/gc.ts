import {FnrCommand} from '../../cli/command.js'
import {clusterFlags, oclifFlags, runnerTemplateFlags} from '../../cli/flags.js'
import {FnrError} from '../../lib/errors.js'
import {runnerTemplateSettings} from '../../lib/flags/runner-flag-specs.js'
import type {GcSummary} from '../../lib/pods/admin/gc.js'

export default class PodsGc extends FnrCommand {
  static summary = 'Delete the function pods (and Services) the runner\'s garbage collector would delete.'

  static description = `Uses the runner's GC rules (src/lib/pods/model/gc.ts) from outside the runner: deletes fnr's pods that failed or ended, and pods whose last use (fnr.dev/last-used) is older than their TTL (fnr.dev/ttl-seconds) or than --older-than; each pod goes with its Service. fnr Services whose pod is gone are deleted once older than a minute.

The CLI cannot see a runner's calls in flight; it reads fnr.dev/last-used, which the runner writes when a call takes a pod and, while calls are in flight on it, again at each of its GC passes (--scan-interval), each time at most once per TTL/10 (5s to 5m). Every pod is deleted with a resourceVersion precondition: a pod that changed since it was listed (a call took it, a replica took it over) is left alone and reported as such.

Stale templates: given the runner's template settings (--function-pod-template, or --wrapper-server-image / $WRAPPER_SERVER_IMAGE with --pod-requests, --pod-limits and --max-request-body-size as the runner has them), the current template version is computed as the runner computes it, and pods made from another version are deleted too, as the runner replaces them, but only once their last use is older than --stale-grace (default 10m; keep it above the runner's TTL/10, at most 5m, plus its --scan-interval). Without those settings this rule is off (said on stderr). Pods whose version comes from FunctionConfigs (--function-config-source=crd|both: "porch-…" or "…-fc…"), which this command does not read, are never judged stale.

Several replicas: the replica Leases in the namespace, read after the pods, say which runners are live. Pods of a live replica are deleted only when they failed or ended: idle ones are left to that replica, whose own GC sees its calls in flight (their TTL, --older-than, the stale-template rule and --all do not apply to them; stop the replica first, which releases its Lease, or add --include-live-replicas to --all). Pods of a replica whose Lease expired (not renewed for two lease durations by this machine's clock) or was released are deleted like orphans. Owners without a Lease (a runner with --replica-lease-duration=0, "fnr pods warm") get the TTL rule. When the Leases cannot be read, every runner counts as live (said on stderr).

Pods and Services without fnr's labels (app.kubernetes.io/managed-by=fnr) are never touched, not even with --all.

Progress goes to stderr (listr2 on a terminal, one line per pod otherwise); stdout gets the result: what was (or, with --dry-run, would be) deleted, or with --json {"namespace", "dryRun", "templateVersion" (null when the stale-template rule is off), "items": [{kind, name, reason, image?, deleted, skipped, error?}], "deleted", "skipped", "failed"}. Exit code 1 when a deletion failed (a pod left alone is not a failure); with --json the summary then also has "error": {kind, message, exitCode}, and any other failure is {"error": …} alone, with the same exit code as without --json.`

  static examples = [
    {description: 'See what would go:', command: '<%= config.bin %> <%= command.id %> --dry-run'},
    '<%= config.bin %> <%= command.id %>',
    {description: 'Pods idle for more than an hour, whatever their TTL:', command: '<%= config.bin %> <%= command.id %> --older-than 1h'},
    {description: 'Remove every fnr pod and Service (e.g. after uninstalling the runner):', command: '<%= config.bin %> <%= command.id %> --all --json'},
    {description: 'Also the pods of runners that are still running:', command: '<%= config.bin %> <%= command.id %> --all --include-live-replicas'},
    {description: 'Also pods of an old template, with the runner\'s template ConfigMap:', command: '<%= config.bin %> <%= command.id %> --function-pod-template kpt-function-eval-pod-template --runner-namespace porch-system --dry-run'},
  ]

  static enableJsonFlag = true

  static flags = {
    ...oclifFlags({
      'dry-run': {kind: 'boolean', summary: 'List what would be deleted; delete nothing.', default: false},
      all: {kind: 'boolean', summary: 'Delete every fnr pod and Service in the namespace, in use or not (pods of live replicas only when failed or ended).', default: false},
      'include-live-replicas': {kind: 'boolean', summary: 'With --all: also the pods of live replicas (calls in flight on them fail; the replicas make new pods on demand).', default: false},
      'older-than': {kind: 'duration', summary: 'Treat pods idle for longer than this as expired, whatever their TTL (e.g. 1h; not live replicas\' pods).'},
      'porch-leftovers': {kind: 'boolean', summary: 'Also delete the function pods and Services Porch\'s runner left (label fn.kpt.dev/image without fnr\'s labels), after a swap; with --dry-run, list them.', default: false},
      'stale-grace': {kind: 'duration', summary: 'Pods of another template version are deleted once idle for this long.', default: 600_000, defaultHelp: '10m'},
    }),
    ...runnerTemplateFlags,
    ...clusterFlags,
  }

  async run(): Promise<GcSummary> {
    const {flags} = await this.parse(PodsGc)
    this.verbosity = flags['log-level']
    const json = this.jsonEnabled()
    const [{collectPods, gcFailure, gcLine}, {runWithProgress}] = await Promise.all([import('../../lib/pods/admin/gc.js'), import('../../cli/progress.js')])
    if (flags['porch-leftovers']) {
      const [{connectKube}, {collectPorchLeftovers}] = await Promise.all([import('../../lib/k8s/client.js'), import('../../lib/pods/cluster/porch-leftovers.js')])
      const clients = await connectKube({kubeconfig: flags.kubeconfig, context: flags.context})
      const leftovers = await collectPorchLeftovers({core: clients.core, namespace: flags.namespace, dryRun: flags['dry-run']})
      for (const o of leftovers) {
        const state = o.error ? `failed: ${o.error}` : o.skipped ? `left alone: ${o.skipped}` : flags['dry-run'] ? 'would be deleted' : 'deleted'
        process.stderr.write(`${o.kind} ${flags.namespace}/${o.name} (left by Porch's runner${o.image ? `, ${o.image}` : ''}): ${state}\n`)
      }
      if (leftovers.some((o) => o.error)) throw new FnrError('Internal', "some of the function pods left by Porch's runner could not be deleted")
    }
    const summary = await collectPods({
      namespace: flags.namespace,
      kube: {kubeconfig: flags.kubeconfig, context: flags.context},
      template: runnerTemplateSettings(flags),
      dryRun: flags['dry-run'],
      all: flags.all,
      includeLive: flags['include-live-replicas'],
      olderThanMs: flags['older-than'],
      staleGraceMs: flags['stale-grace'],
      run: (tasks) => runWithProgress(tasks),
      // The template notices are for people; that the Leases cannot be read changes what is deleted.
      notice: (n) => (n.kind === 'leases' || !json) && process.stderr.write(`${n.message}\n`),
    })
    if (!json) {
      if (summary.items.length === 0) process.stderr.write(`Nothing to collect in namespace ${flags.namespace}.\n`)
      else process.stdout.write(summary.items.map((r) => `${gcLine(r, summary.dryRun)}\n`).join(''))
    }
    const failure = gcFailure(summary)
    if (failure) throw failure
    return summary
  }
}
