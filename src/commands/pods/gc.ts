import {Flags} from '@oclif/core'

import {FnrCommand} from '../../lib/cli/command.js'
import {clusterFlags, goDuration, runnerTemplateFlags} from '../../lib/cli/flags.js'
import {FnrError} from '../../lib/errors.js'

export default class PodsGc extends FnrCommand {
  static summary = 'Delete the function pods (and Services) the runner\'s garbage collector would delete.'

  static description = `Uses the runner's GC rules (src/lib/pods/gc.ts) from outside the runner: deletes fnr's pods that failed or ended, and pods whose last use (fnr.dev/last-used, kept current by the runner while a pod takes calls) is older than their TTL (fnr.dev/ttl-seconds) or than --older-than; each pod goes with its Service. fnr Services whose pod is gone are deleted once older than a minute. A pod in use has a recent last use and is kept.

Stale templates: given the runner's template settings (--function-pod-template, or --wrapper-server-image / $WRAPPER_SERVER_IMAGE with --pod-requests, --pod-limits and --max-request-body-size as the runner has them), the current template version is computed as the runner computes it, and pods made from another version are deleted too, as the runner replaces them, but only once their last use is older than --stale-grace (default 10m): the CLI cannot see a runner's calls in flight, and the runner refreshes fnr.dev/last-used whenever a call takes a pod (at least every 5 minutes while it is in use), so keep --stale-grace above your longest function call plus 5 minutes. Without those settings this rule is off (said on stderr). Pods whose version comes from FunctionConfigs (--function-config-source=crd|both: "porch-…" or "…-fc…"), which this command does not read, are never judged stale.

Several replicas: the replica Leases in the namespace say which runners are live. Pods of a live replica are deleted only by the rules that replica applies to its own (failed or ended, idle past their own TTL); --older-than, the stale-template rule and --all do not apply to them (stop the replica first: it releases its Lease). Pods of a replica whose Lease expired (not renewed for two lease durations by this machine's clock) or was released are deleted like orphans, each only if unchanged since listed (a replica taking it over wins). When the Leases cannot be read, every runner counts as live (said on stderr).

Pods and Services without fnr's labels (app.kubernetes.io/managed-by=fnr) are never touched, not even with --all.

Progress goes to stderr (listr2 on a terminal, one line per pod otherwise); stdout gets the result: what was (or, with --dry-run, would be) deleted, or with --json {"namespace", "dryRun", "templateVersion" (null when the stale-template rule is off), "items": [{kind, name, reason, image?, deleted, error?}], "deleted", "failed"}. Exit code 1 when a deletion failed.`

  static examples = [
    {description: 'See what would go:', command: '<%= config.bin %> <%= command.id %> --dry-run'},
    '<%= config.bin %> <%= command.id %>',
    {description: 'Pods idle for more than an hour, whatever their TTL:', command: '<%= config.bin %> <%= command.id %> --older-than 1h'},
    {description: 'Remove every fnr pod and Service (e.g. after uninstalling the runner):', command: '<%= config.bin %> <%= command.id %> --all --json'},
    {description: 'Also the pods of runners that are still running:', command: '<%= config.bin %> <%= command.id %> --all --include-live-replicas'},
    {description: 'Also pods of an old template, with the runner\'s template ConfigMap:', command: '<%= config.bin %> <%= command.id %> --function-pod-template kpt-function-eval-pod-template --runner-namespace porch-system --dry-run'},
  ]

  static flags = {
    'dry-run': Flags.boolean({summary: 'List what would be deleted; delete nothing.', default: false}),
    all: Flags.boolean({summary: 'Delete every fnr pod and Service in the namespace, in use or not (pods of live replicas only by their own rules).', default: false}),
    'include-live-replicas': Flags.boolean({summary: 'With --all: also the pods of live replicas (calls in flight on them fail; the replicas make new pods on demand).', default: false}),
    'older-than': goDuration({summary: 'Treat pods idle for longer than this as expired, whatever their TTL (e.g. 1h).'}),
    json: Flags.boolean({summary: 'Print a JSON summary.', default: false}),
    'stale-grace': goDuration({summary: 'Pods of another template version are deleted once idle for this long.', default: 600_000, defaultHelp: async () => '10m'}),
    ...runnerTemplateFlags,
    ...clusterFlags,
  }

  async run(): Promise<void> {
    const {flags} = await this.parse(PodsGc)
    this.verbosity = flags['log-level']
    if (flags['include-live-replicas'] && !flags.all) throw new FnrError('Usage', '--include-live-replicas only goes with --all')
    const {PodOperator, runWithProgress} = await import('../../lib/pods/operator.js')
    const operator = await PodOperator.connect({namespace: flags.namespace, kube: {kubeconfig: flags.kubeconfig, context: flags.context}})
    try {
      const {templatesConfigured} = await import('../../lib/pods/template-operator.js')
      const template = {
        templateConfigMap: flags['function-pod-template'],
        wrapperServerImage: flags['wrapper-server-image'] || undefined,
        runnerNamespace: flags['runner-namespace'],
        podRequests: flags['pod-requests'],
        podLimits: flags['pod-limits'],
        maxRequestBodySize: flags['max-request-body-size'],
      }
      let templateVersion: string | null = null
      if (!flags.all) {
        if (templatesConfigured(template)) {
          const templates = await operator.currentTemplates(template)
          templateVersion = templates.version
          if (!flags.json) process.stderr.write(`Current template version ${templates.version} (${templates.origin}); pods of other versions idle for ${seconds(flags['stale-grace'])} or more are stale.\n`)
        } else if (!flags.json) {
          process.stderr.write('Stale-template rule off: pass --wrapper-server-image (or set WRAPPER_SERVER_IMAGE) or --function-pod-template as the runner has them.\n')
        }
      }
      const leases = await operator.leaseStates()
      if (leases.error) process.stderr.write(`Cannot read the replica Leases (${leases.error}): every runner counts as live, so only failed pods and pods idle past their own TTL are deleted.\n`)
      const items = await operator.planGc({all: flags.all, includeLive: flags['include-live-replicas'], olderThanMs: flags['older-than'], orphanMinAgeMs: flags.all ? 0 : undefined, currentTemplateVersion: templateVersion ?? undefined, staleGraceMs: flags['stale-grace']}, leases)
      const label = (i: {kind: string; name: string}): string => `${i.kind === 'pod' ? 'pod' : 'Service'} ${i.name}`
      if (flags['dry-run']) {
        const out = items.map((i) => ({...i, deleted: false}))
        if (flags.json) process.stdout.write(`${JSON.stringify({namespace: flags.namespace, dryRun: true, templateVersion, items: out, deleted: 0, failed: 0}, null, 2)}\n`)
        else if (items.length === 0) process.stderr.write(`Nothing to collect in namespace ${flags.namespace}.\n`)
        else process.stdout.write(items.map((i) => `would delete ${label(i)}${i.image ? ` (${i.image})` : ''}: ${i.reason}\n`).join(''))
        return
      }
      const results = await runWithProgress(
        items.map((item) => ({
          title: `deleting ${label(item)}`,
          run: () => operator.deleteItem(item),
          done: (r: {deleted: boolean; error?: string}) => ({ok: r.deleted, line: r.deleted ? `deleted ${label(item)}: ${item.reason}` : `cannot delete ${label(item)}: ${r.error}`}),
        })),
      )
      const failed = results.filter((r) => !r.deleted).length
      if (flags.json) {
        process.stdout.write(`${JSON.stringify({namespace: flags.namespace, dryRun: false, templateVersion, items: results, deleted: results.length - failed, failed}, null, 2)}\n`)
      } else if (results.length === 0) {
        process.stderr.write(`Nothing to collect in namespace ${flags.namespace}.\n`)
      } else {
        process.stdout.write(results.map((r) => (r.deleted ? `deleted ${label(r)}: ${r.reason}\n` : `FAILED ${label(r)}: ${r.error}\n`)).join(''))
      }
      if (failed > 0) throw new FnrError('Internal', `${failed} of ${results.length} deletions failed`)
    } finally {
      operator.close()
    }
  }
}

function seconds(ms: number): string {
  const s = Math.round(ms / 1000)
  return s % 3600 === 0 && s > 0 ? `${s / 3600}h` : s % 60 === 0 && s > 0 ? `${s / 60}m` : `${s}s`
}
