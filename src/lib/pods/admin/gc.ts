/**
 * `fnr pods gc`: one garbage collection from outside the runner, with the rules of admin/admin.ts
 * (planAdminGc, on gc.ts's planGc) and PodAdmin's API calls. The flow:
 *   1. check the options (Usage errors before any cluster call);
 *   2. the runner's current templates, when their settings are given (the stale-template rule;
 *      admin/templates.ts builds them as `fnr serve` does);
 *   3. list fnr's pods and Services, then the replica Leases (a replica creates its Lease before
 *      its first pod, so every pod listed has its owner's Lease in the list that follows);
 *   4. only then the notices (template version, Leases not readable): a run that cannot reach
 *      the API server prints its one error line and nothing else;
 *   5. plan, then (unless a dry run) delete each item, every pod with a resourceVersion
 *      precondition (left alone when it changed since it was listed), through `run` for progress;
 *   6. the summary (the --json schema).
 */
import {FnrError} from '../../errors.js'
import type {KubeConnectOptions} from '../../k8s/client.js'
import type {Logger} from '../../telemetry/log.js'
import {CHANGED_SINCE_LISTED, PodAdmin, type GcItem, type GcItemResult} from './admin.js'
import {templatesConfigured, type RunnerTemplateOptions} from './templates.js'

export interface CollectPodsOptions {
  /** The pod namespace (serve's --pod-namespace). */
  namespace: string
  kube?: KubeConnectOptions
  /** The runner's template settings (the stale-template rule is off without a ConfigMap or wrapper-server image). */
  template: RunnerTemplateOptions
  dryRun?: boolean
  all?: boolean
  includeLive?: boolean
  /** --older-than (ms, > 0). */
  olderThanMs?: number
  /** --stale-grace (ms, > 0). */
  staleGraceMs: number
  /** Progress per item; the default prints nothing. */
  run?: <R>(tasks: Array<{title: string; run: (update: (detail: string) => void) => Promise<R>; done: (r: R) => {ok: boolean; line: string}}>) => Promise<R[]>
  /** Told once the pods were read: the stale-template rule's state, and Leases that cannot be read. */
  notice?: (notice: GcNotice) => void
  logger?: Logger
}

export interface GcNotice {
  /** template: the current template version; template-off: the rule is off; leases: the Leases cannot be read. */
  kind: 'template' | 'template-off' | 'leases'
  message: string
}

/** The --json output of `fnr pods gc`. */
export interface GcSummary {
  namespace: string
  dryRun: boolean
  /** The runner's current template version, null when the stale-template rule is off. */
  templateVersion: string | null
  items: GcItemResult[]
  deleted: number
  /** Pods left alone because they changed since they were listed. */
  skipped: number
  failed: number
}

/**
 * The error a run with failed deletions ends with (exit 1; a pod left alone is not a failure),
 * carrying the summary for --json; undefined when every deletion went through.
 */
export function gcFailure(summary: GcSummary): FnrError | undefined {
  if (summary.failed === 0) return undefined
  return new FnrError('Internal', `${summary.failed} of ${summary.items.length} deletions failed`, {details: {report: summary}})
}

function durationText(ms: number): string {
  const s = Math.round(ms / 1000)
  return s % 3600 === 0 && s > 0 ? `${s / 3600}h` : s % 60 === 0 && s > 0 ? `${s / 60}m` : s > 0 ? `${s}s` : `${ms}ms`
}

/** "pod NAME" or "Service NAME". */
export function gcItemLabel(item: Pick<GcItem, 'kind' | 'name'>): string {
  return `${item.kind === 'pod' ? 'pod' : 'Service'} ${item.name}`
}

/** One line per item, for the text output (and progress, except for failures). */
export function gcLine(r: GcItemResult, dryRun = false): string {
  if (dryRun) return `would delete ${gcItemLabel(r)}${r.image ? ` (${r.image})` : ''}: ${r.reason}`
  if (r.deleted) return `deleted ${gcItemLabel(r)}: ${r.reason}`
  if (r.skipped) return `left ${gcItemLabel(r)} alone: ${CHANGED_SINCE_LISTED}`
  return `FAILED ${gcItemLabel(r)}: ${r.error}`
}

function checkOptions(options: CollectPodsOptions): void {
  if (options.includeLive && !options.all) throw new FnrError('Usage', '--include-live-replicas only goes with --all')
  if (options.olderThanMs !== undefined && !(options.olderThanMs > 0)) throw new FnrError('Usage', '--older-than must be a positive duration')
  if (!(options.staleGraceMs > 0)) throw new FnrError('Usage', '--stale-grace must be a positive duration')
}

function defaultRun<R>(tasks: Array<{run: (update: (detail: string) => void) => Promise<R>}>): Promise<R[]> {
  return Promise.all(tasks.map((t) => t.run(() => {})))
}

/** One GC from outside the runner (see the top of this file); never deletes anything that is not fnr's. */
export async function collectPods(options: CollectPodsOptions): Promise<GcSummary> {
  checkOptions(options)
  const operator = await PodAdmin.connect({namespace: options.namespace, kube: options.kube, logger: options.logger})
  try {
    const notices: GcNotice[] = []
    let templateVersion: string | null = null
    if (!options.all) {
      if (templatesConfigured(options.template)) {
        const templates = await operator.currentTemplates(options.template)
        templateVersion = templates.version
        notices.push({kind: 'template', message: `Current template version ${templates.version} (${templates.origin}); pods of other versions idle for ${durationText(options.staleGraceMs)} or more are stale.`})
      } else {
        notices.push({kind: 'template-off', message: 'Stale-template rule off: pass --wrapper-server-image (or set WRAPPER_SERVER_IMAGE) or --function-pod-template as the runner has them.'})
      }
    }
    const listing = await operator.listForGc()
    const leases = await operator.leaseStates()
    if (leases.error) notices.push({kind: 'leases', message: `Cannot read the replica Leases (${leases.error}): every runner counts as live, so only pods that failed or ended are deleted.`})
    for (const n of notices) options.notice?.(n)

    const items = operator.plan(
      listing,
      {
        all: options.all,
        includeLive: options.includeLive,
        olderThanMs: options.olderThanMs,
        orphanMinAgeMs: options.all ? 0 : undefined,
        currentTemplateVersion: templateVersion ?? undefined,
        staleGraceMs: options.staleGraceMs,
      },
      leases,
    )
    const summary = (results: GcItemResult[]): GcSummary => ({
      namespace: options.namespace,
      dryRun: !!options.dryRun,
      templateVersion,
      items: results,
      deleted: results.filter((r) => r.deleted).length,
      skipped: results.filter((r) => r.skipped).length,
      failed: results.filter((r) => !r.deleted && !r.skipped && !options.dryRun).length,
    })
    if (options.dryRun) return summary(items.map((i) => ({...i, deleted: false, skipped: false})))
    const run = options.run ?? defaultRun
    const results = await run(
      items.map((item) => ({
        title: `deleting ${gcItemLabel(item)}`,
        run: () => operator.deleteItem(item),
        done: (r: GcItemResult) => ({ok: r.deleted || r.skipped, line: r.deleted || r.skipped ? gcLine(r) : `cannot delete ${gcItemLabel(r)}: ${r.error}`}),
      })),
    )
    return summary(results)
  } finally {
    operator.close()
  }
}
