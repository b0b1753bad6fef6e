/**
 * `fnr pods ls`: the function pods fnr manages in a namespace, as data (--json prints it as is)
 * and as the command's table.
 */
import {PodAdmin, type AdminOptions, type FunctionPodInfo} from './admin.js'

/** What `fnr pods ls --json` prints. */
export interface PodListing {
  namespace: string
  pods: FunctionPodInfo[]
}

export async function listPods(options: AdminOptions & {image?: string}): Promise<PodListing> {
  const admin = await PodAdmin.connect(options)
  try {
    return {namespace: options.namespace, pods: await admin.list({image: options.image})}
  } finally {
    admin.close()
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

/** The command's table, one row per pod under a header. */
export function formatPodTable(pods: readonly FunctionPodInfo[], now = Date.now()): string {
  const rows = [['IMAGE', 'POD', 'SERVICE', 'STATE', 'READY', 'AGE', 'LAST USED', 'TTL LEFT', 'TEMPLATE', 'OWNER', 'LEASE']]
  for (const p of pods) {
    const lastUsedAgo = p.lastUsed === null ? null : Math.floor((now - Date.parse(p.lastUsed)) / 1000)
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
