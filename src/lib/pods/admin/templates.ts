/**
 * The runner's current function pod templates, as seen from outside the runner (`fnr pods warm`
 * and the stale-template rule of `fnr pods gc`). They are built exactly as `fnr serve` builds them
 * (runtime.ts): the --function-pod-template ConfigMap in the runner's namespace, read and checked
 * by the same code as the runner's TemplateSource, or else the inline template made from the
 * wrapper-server image and --pod-requests/--pod-limits; both with the max message size folded into
 * the version. Given the same flags as the runner, the version is the runner's, so pods made from
 * these templates are adopted by it and pods of other versions are the ones it would replace.
 */
import {parseResourceFlags, type ResourceRequirements} from '../../config/pod-cache-config.js'
import {FnrError} from '../../errors.js'
import {runnerNamespace, type KubeClients} from '../../k8s/client.js'
import {inlineTemplates, type Templates} from '../model/template.js'
import {readTemplateConfigMap} from '../cluster/template-source.js'

export interface RunnerTemplateOptions {
  /** --function-pod-template: a ConfigMap name, or '' for the inline template. */
  templateConfigMap: string
  /** --wrapper-server-image ($WRAPPER_SERVER_IMAGE): needed by the inline template. */
  wrapperServerImage?: string
  /** --runner-namespace: where the ConfigMap is; default as the runner finds its own namespace. */
  runnerNamespace?: string
  /** --pod-requests / --pod-limits, as given (e.g. "cpu=100m,memory=128Mi"). */
  podRequests: string
  podLimits: string
  /** --max-request-body-size */
  maxRequestBodySize: number
  /** --harden-pod-templates (as the runner's) */
  hardenTemplates?: boolean
}

/** The inline template's function container resources, parsed as `fnr serve` parses them. */
export function inlineResources(options: Pick<RunnerTemplateOptions, 'podRequests' | 'podLimits'>): ResourceRequirements {
  return parseResourceFlags(options.podRequests, options.podLimits)
}

/** True when the options say where the templates come from (a ConfigMap, or the wrapper-server image). */
export function templatesConfigured(options: Pick<RunnerTemplateOptions, 'templateConfigMap' | 'wrapperServerImage'>): boolean {
  return options.templateConfigMap !== '' || !!options.wrapperServerImage
}

/**
 * Builds (or reads) the templates; FnrError('Config') when neither a ConfigMap nor a
 * wrapper-server image is given, or the ConfigMap is missing or breaks the template contract.
 */
export async function runnerTemplates(clients: Pick<KubeClients, 'core' | 'source'>, options: RunnerTemplateOptions): Promise<Templates> {
  const extra = {maxRequestBodySize: options.maxRequestBodySize}
  if (options.templateConfigMap) {
    // The runner's own namespace (its service account's, else $POD_NAMESPACE, else porch-system);
    // the operator's kubeconfig context namespace says nothing about where the runner runs.
    const namespace = options.runnerNamespace || runnerNamespace({source: clients.source, contextNamespace: undefined})
    return (await readTemplateConfigMap(clients.core, namespace, options.templateConfigMap, extra, {harden: options.hardenTemplates === true})).templates
  }
  if (!options.wrapperServerImage) {
    throw new FnrError('Config', 'the runner\'s pod template is unknown: pass --wrapper-server-image (or set WRAPPER_SERVER_IMAGE) as for `fnr serve`, or --function-pod-template')
  }
  return inlineTemplates({wrapperServerImage: options.wrapperServerImage, resources: inlineResources(options)}, extra)
}
