import {FnrCommand} from '../../cli/command.js'
import {clusterFlags, oclifFlags} from '../../cli/flags.js'
import type {FunctionPodInfo} from '../../lib/pods/admin/admin.js'

export default class PodsLs extends FnrCommand {
  static summary = 'List the function pods fnr manages: image, pod and Service, state, age, last use, TTL left, template version, owner.'

  static description = `Lists every pod labelled app.kubernetes.io/managed-by=fnr in --namespace (the runner's --pod-namespace), with the Service that fronts it. Pods and Services of anything else are never shown. TTL LEFT counts from the pod's last use (fnr.dev/last-used; its creation when never used); negative means expired, and the runner's GC will delete it.

With --json, stdout is {"namespace": …, "pods": [{pod, service, image, phase, ready, state, detail, created, ageSeconds, lastUsed, ttlSeconds, ttlLeftSeconds, templateVersion, owner, ownerLease, podIP}]}. ownerLease is what the owner's replica Lease says: live, expired, released, or none (no Lease: a runner without one, or "fnr pods warm"); null when the Leases cannot be read. The LEASE column shows it.`

  static examples = [
    '<%= config.bin %> <%= command.id %>',
    {description: 'The pods of one image, as JSON:', command: '<%= config.bin %> <%= command.id %> --image ghcr.io/kptdev/krm-functions-catalog/starlark:v0.4.3 --json'},
    {description: 'Another cluster and namespace:', command: '<%= config.bin %> <%= command.id %> --context prod -n porch-fn-system'},
  ]

  static flags = {
    ...oclifFlags({
      image: {kind: 'string', summary: 'Only pods of this image (the reference exactly as requested).'},
      json: {kind: 'boolean', summary: 'Print JSON.', default: false},
    }),
    ...clusterFlags,
  }

  async run(): Promise<void> {
    const {flags} = await this.parse(PodsLs)
    this.verbosity = flags['log-level']
    const {PodAdmin} = await import('../../lib/pods/admin/admin.js')
    const operator = await PodAdmin.connect({namespace: flags.namespace, kube: {kubeconfig: flags.kubeconfig, context: flags.context}})
    try {
      const pods = await operator.list({image: flags.image})
      if (flags.json) {
        process.stdout.write(`${JSON.stringify({namespace: flags.namespace, pods}, null, 2)}\n`)
      } else if (pods.length === 0) {
        process.stderr.write(`No function pods managed by fnr in namespace ${flags.namespace}${flags.image ? ` for image ${flags.image}` : ''}.\n`)
      } else {
        process.stdout.write(renderTable(pods))
      }
    } finally {
      operator.close()
    }
  }
}

function duration(seconds: number | null): string {
  if (seconds === null) return '-'
  const sign = seconds < 0 ? '-' : ''
  let s = Math.abs(seconds)
  if (s < 60) return `${sign}${s}s`
  const m = Math.floor(s / 60)
  s %= 60
  if (m < 60) return `${sign}${m}m${s ? `${s}s` : ''}`
  const h = Math.floor(m / 60)
  return `${sign}${h}h${m % 60 ? `${m % 60}m` : ''}`
}

function renderTable(pods: FunctionPodInfo[]): string {
  const rows = [['IMAGE', 'POD', 'SERVICE', 'STATE', 'READY', 'AGE', 'LAST USED', 'TTL LEFT', 'TEMPLATE', 'OWNER', 'LEASE']]
  for (const p of pods) {
    const lastUsedAgo = p.lastUsed === null ? null : Math.floor((Date.now() - Date.parse(p.lastUsed)) / 1000)
    rows.push([
      p.image ?? '-',
      p.pod,
      p.service ?? '-',
      p.state === 'starting' || p.state === 'failed' ? `${p.state} (${p.detail})` : p.state,
      p.ready ? 'yes' : 'no',
      duration(p.ageSeconds),
      lastUsedAgo === null ? '-' : `${duration(lastUsedAgo)} ago`,
      p.ttlLeftSeconds === null ? '-' : p.ttlLeftSeconds < 0 ? 'expired' : duration(p.ttlLeftSeconds),
      p.templateVersion ?? '-',
      p.owner ?? '-',
      p.ownerLease ?? '?',
    ])
  }
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)))
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')).join('\n') + '\n'
}
