import {FnrCommand} from '../../cli/command.js'
import {clusterFlags, oclifFlags} from '../../cli/flags.js'
import type {PodListing} from '../../lib/pods/admin/ls.js'

export default class PodsLs extends FnrCommand {
  static summary = 'List the function pods fnr manages: image, pod and Service, state, age, last use, TTL left, template version, owner.'

  static description = `Lists every pod labelled app.kubernetes.io/managed-by=fnr in --namespace (the runner's --pod-namespace), with the Service that fronts it. Pods and Services of anything else are never shown. TTL LEFT counts from the pod's last use (fnr.dev/last-used; its creation when never used); negative means expired, and the runner's GC will delete it.

With --json, stdout is {"namespace": …, "pods": [{pod, service, image, phase, ready, state, detail, created, ageSeconds, lastUsed, ttlSeconds, ttlLeftSeconds, templateVersion, owner, ownerLease, podIP}]}. ownerLease is what the owner's replica Lease says: live, expired, released, or none (no Lease: a runner without one, or "fnr pods warm"); null when the Leases cannot be read. The LEASE column shows it. A failure is {"error": {kind, message, exitCode}} on stdout, with the same exit code as without --json.`

  static examples = [
    '<%= config.bin %> <%= command.id %>',
    {description: 'The pods of one image, as JSON:', command: '<%= config.bin %> <%= command.id %> --image ghcr.io/kptdev/krm-functions-catalog/starlark:v0.4.3 --json'},
    {description: 'Another cluster and namespace:', command: '<%= config.bin %> <%= command.id %> --context prod -n porch-fn-system'},
  ]

  static enableJsonFlag = true

  static flags = {
    ...oclifFlags({
      image: {kind: 'string', summary: 'Only pods of this image (the reference exactly as requested).'},
    }),
    ...clusterFlags,
  }

  async run(): Promise<PodListing> {
    const {flags} = await this.parse(PodsLs)
    this.verbosity = flags['log-level']
    const {listPods, formatPodTable} = await import('../../lib/pods/admin/ls.js')
    const listing = await listPods({namespace: flags.namespace, kube: {kubeconfig: flags.kubeconfig, context: flags.context}, image: flags.image})
    if (!this.jsonEnabled()) {
      if (listing.pods.length === 0) process.stderr.write(`No function pods managed by fnr in namespace ${flags.namespace}${flags.image ? ` for image ${flags.image}` : ''}.\n`)
      else process.stdout.write(formatPodTable(listing.pods))
    }
    return listing
  }
}
