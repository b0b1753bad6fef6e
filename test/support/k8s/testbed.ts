/**
 * startTestBed: a test API server, a kubeconfig for it, a client-node KubeConfig and (by default) a local kubelet,
 * in one call. `stop()` removes everything again.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import type { KubectlOptions, KubectlResult } from './kubectl.js';
import { KubectlStream, runKubectl } from './kubectl.js';
import type { LocalKubeletOptions } from './kubelet.js';
import { LocalKubelet } from './kubelet.js';
import type { TestApiServerOptions } from './server.js';
import { TestApiServer } from './server.js';

export interface TestBedOptions {
  /** Options for the API server (tls, token, historyLimit, bookmarkIntervalMs, ...). */
  server?: TestApiServerOptions;
  /** Options for the local kubelet (imageMap, commandMap, ...), or false for no kubelet. */
  kubelet?: false | Omit<LocalKubeletOptions, 'api'>;
  /** The kubeconfig context's namespace; created if it does not exist. Default `default`. */
  namespace?: string;
  /** More namespaces to create up front. */
  namespaces?: string[];
  /**
   * Load @kubernetes/client-node and build `kubeConfig` (default true). Importing client-node takes about a second
   * once per process; suites that only use kubectl or raw HTTP can pass false, and `kubeConfig` then throws.
   */
  clientNode?: boolean;
}

export interface TestBed {
  api: TestApiServer;
  /** The API server URL, e.g. http://127.0.0.1:40123 */
  url: string;
  /** A kubeconfig file for this cluster (context `fnr-test`), inside a temp dir removed by stop(). */
  kubeconfigPath: string;
  /** The temp dir holding the kubeconfig (and kubectl's cache). */
  dir: string;
  /** A client-node KubeConfig loaded from kubeconfigPath (unless the bed was started with clientNode: false). */
  readonly kubeConfig: KubeConfig;
  kubelet: LocalKubelet | undefined;
  /** Runs the real kubectl against this cluster. */
  kubectl(args: string[], options?: KubectlOptions): Promise<KubectlResult>;
  /** Starts a long-running kubectl (e.g. `get -w`); stop it yourself (stop() of the bed stops it too). */
  kubectlStream(args: string[]): KubectlStream;
  /** Stops the kubelet (killing pod processes), the server, and removes the temp dir. Idempotent. */
  stop(): Promise<void>;
}

/** Writes a kubeconfig for a server; http servers get insecure-skip-tls-verify (client-node refuses http without it). */
export function kubeconfigYaml(api: TestApiServer, namespace = 'default'): string {
  const cluster = api.isTls
    ? `    certificate-authority-data: ${Buffer.from(api.caPem!, 'utf8').toString('base64')}\n`
    : '    insecure-skip-tls-verify: true\n';
  const user = api.token ? `    token: ${api.token}\n` : '    {}\n';
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '- name: fnr-test',
    '  cluster:',
    `    server: ${api.url}`,
    cluster.trimEnd(),
    'users:',
    '- name: fnr-test',
    '  user:',
    user.trimEnd(),
    'contexts:',
    '- name: fnr-test',
    '  context:',
    '    cluster: fnr-test',
    '    user: fnr-test',
    `    namespace: ${namespace}`,
    'current-context: fnr-test',
    '',
  ].join('\n');
}

export async function startTestBed(options: TestBedOptions & { kubelet: false }): Promise<TestBed & { kubelet: undefined }>;
export async function startTestBed(options?: TestBedOptions): Promise<TestBed & { kubelet: LocalKubelet }>;
export async function startTestBed(options: TestBedOptions = {}): Promise<TestBed> {
  const dir = await mkdtemp(join(tmpdir(), 'fnr-testbed-'));
  let api: TestApiServer | undefined;
  let kubelet: LocalKubelet | undefined;
  const streams = new Set<KubectlStream>();
  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopped ??= (async () => {
      await Promise.allSettled([...streams].map((s) => s.stop()));
      await kubelet?.stop();
      await api?.stop();
      await rm(dir, { recursive: true, force: true });
    })();
    return stopped;
  };
  try {
    api = await TestApiServer.start(options.server ?? {});
    const namespace = options.namespace ?? 'default';
    for (const ns of new Set([namespace, ...(options.namespaces ?? [])])) {
      if (!api.registry.find('namespaces', undefined, ns)) api.registry.create('namespaces', undefined, { metadata: { name: ns } });
    }
    const kubeconfigPath = join(dir, 'kubeconfig');
    await writeFile(kubeconfigPath, kubeconfigYaml(api, namespace), { mode: 0o600 });
    let kubeConfig: KubeConfig | undefined;
    if (options.clientNode !== false) {
      const k8s = await import('@kubernetes/client-node');
      kubeConfig = new k8s.KubeConfig();
      kubeConfig.loadFromFile(kubeconfigPath);
    }
    if (options.kubelet !== false) {
      kubelet = new LocalKubelet({ ...(options.kubelet ?? {}), api });
      await kubelet.start();
    }
    const target = { kubeconfigPath, cacheDir: join(dir, 'kubectl-cache') };
    return {
      api,
      url: api.url,
      kubeconfigPath,
      dir,
      get kubeConfig(): KubeConfig {
        if (!kubeConfig) throw new Error('this test bed was started with clientNode: false, so it has no client-node KubeConfig');
        return kubeConfig;
      },
      kubelet,
      kubectl: (args, kubectlOptions) => runKubectl(target, args, kubectlOptions),
      kubectlStream: (args) => {
        const stream = new KubectlStream(target, args);
        streams.add(stream);
        void stream.exited.then(() => streams.delete(stream));
        return stream;
      },
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}
