/**
 * The runc node on its own (no API server): images pulled from a real registry (docker-registry, htpasswd) with
 * imagePullSecrets, layers with whiteouts, the OCI config from the image and the container spec, init containers
 * and emptyDir volumes, securityContext, a network namespace per pod reachable from the host, probes, restarts
 * and the states a kubelet reports.
 */
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';

import { findStaticBusybox, type NodePod, type PodHost, RuncRuntime } from '../support/node/index.js';
import { dockerConfigJson, TestRegistry } from '../support/registry/registry.js';
import { pushImage } from '../support/registry/fixtures.js';
import { run } from '../support/node/runc.js';

type KubeObject = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

class FakeHost implements PodHost {
  statuses: KubeObject[] = [];
  objects = new Map<string, Record<string, string>>();
  async read(kind: 'configmaps' | 'secrets', namespace: string, name: string): Promise<Record<string, string> | undefined> {
    return this.objects.get(`${kind}/${namespace}/${name}`);
  }
  async writeStatus(status: KubeObject): Promise<void> {
    this.statuses.push(status);
  }
  get last(): KubeObject {
    return this.statuses[this.statuses.length - 1] ?? {};
  }
  async until(what: string, check: (s: KubeObject) => boolean, timeoutMs = 60_000): Promise<KubeObject> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const found = this.statuses.find(check);
      if (found) return found;
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}; last status: ${JSON.stringify(this.last, null, 1)}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

let podCounter = 0;
function pod(spec: KubeObject, name = `p${++podCounter}`): KubeObject {
  return { metadata: { name, namespace: 'default', uid: `uid-${process.pid}-${name}-${Date.now()}` }, spec: { restartPolicy: 'Never', ...spec } };
}
const cs = (s: KubeObject, name: string): KubeObject => [...(s.containerStatuses ?? []), ...(s.initContainerStatuses ?? [])].find((c: KubeObject) => c.name === name) ?? {};

describe('runc node: pods from a real registry under runc, without an API server', function () {
  this.timeout(120_000);
  let registry: TestRegistry;
  let node: RuncRuntime;
  let img: string;
  let pullSecret: Record<string, string>;
  const pods: NodePod[] = [];
  const start = (p: KubeObject, host: FakeHost): NodePod => {
    const np = node.startPod(p, host);
    pods.push(np);
    return np;
  };

  before(async function () {
    this.timeout(180_000);
    registry = await TestRegistry.start({ mode: 'htpasswd' });
    const auth = await registry.writeAuthFile('testuser', 'testpass');
    const busybox = readFileSync(findStaticBusybox()!);
    img = `${registry.host}/node/busybox:v1`;
    await pushImage(
      registry,
      'node/busybox:v1',
      {
        entrypoint: ['/bin/busybox', 'sh', '-c'],
        cmd: ['echo default-cmd'],
        env: ['PATH=/bin', 'GREETING=from-image', 'OVERRIDE=image'],
        workingDir: '/work',
        user: '65532',
        files: {
          'bin/busybox': busybox,
          'bin/sh': busybox,
          'etc/passwd': 'root:x:0:0:root:/root:/bin/sh\nnonroot:x:65532:65532:nonroot:/home/nonroot:/bin/sh\n',
          'etc/group': 'root:x:0:\nnonroot:x:65532:\n',
          'work/.keep': '',
          'removed.txt': 'lower\n',
          'opq/old.txt': 'lower\n',
          'kept.txt': 'lower\n',
        },
        layers: [{ '.wh.removed.txt': '', 'opq/.wh..wh..opq': '', 'opq/new.txt': 'upper\n', 'kept.txt': 'upper\n' }],
      },
      auth,
    );
    pullSecret = { '.dockerconfigjson': dockerConfigJson(registry.host, 'testuser', 'testpass') };
    node = await RuncRuntime.create({ backoffMs: 200, maxBackoffMs: 1000, retryMs: 200 });
  });

  after(async () => {
    await Promise.all(pods.map((p) => p.abandon(500)));
    await node?.stop();
    await registry?.stop();
    expect(RuncRuntime.liveNetworks()).to.deep.equal([]);
  });

  const hostWithSecret = (): FakeHost => {
    const h = new FakeHost();
    h.objects.set('secrets/default/regcred', pullSecret);
    return h;
  };

  it('runs init containers in order, shares emptyDir, applies image config, whiteouts and securityContext', async () => {
    const h = hostWithSecret();
    const started = Date.now();
    start(
      pod({
        imagePullSecrets: [{ name: 'regcred' }],
        securityContext: { fsGroup: 2000 },
        volumes: [{ name: 'shared', emptyDir: {} }],
        initContainers: [
          { name: 'first', image: img, args: ['echo one > /shared/order'], volumeMounts: [{ name: 'shared', mountPath: '/shared' }] },
          { name: 'second', image: img, args: ['echo two >> /shared/order'], volumeMounts: [{ name: 'shared', mountPath: '/shared' }] },
        ],
        containers: [
          {
            name: 'main',
            image: img,
            env: [{ name: 'OVERRIDE', value: 'spec' }, { name: 'COMBINED', value: '$(GREETING)-x' }],
            args: [
              [
                'cat /shared/order',
                'echo "id=$(id -u):$(id -g) groups=$(id -G)"',
                'echo "pwd=$(pwd) greeting=$GREETING override=$OVERRIDE combined=$COMBINED"',
                'ls /removed.txt 2>&1 | head -1',
                'echo "opq=$(ls /opq) kept=$(cat /kept.txt)"',
                'touch /rootfs-write 2>/dev/null && echo rootfs=rw || echo rootfs=ro',
                'touch /shared/w && echo shared=rw',
                'grep -E "^(CapEff|NoNewPrivs)" /proc/self/status',
                'echo "hostname=$(hostname)"',
              ].join('; '),
            ],
            volumeMounts: [{ name: 'shared', mountPath: '/shared' }],
            securityContext: { readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] }, runAsGroup: 3000 },
          },
          { name: 'other', image: img, args: ['id -u'], securityContext: { runAsUser: 1234 } },
        ],
      }, 'full'),
      h,
    );
    const done = await h.until('Succeeded', (s) => s.phase === 'Succeeded' || s.phase === 'Failed');
    console.log(`      pod pull+unpack+2 init+2 containers to Succeeded: ${Date.now() - started} ms`);
    expect(done.phase, JSON.stringify(done)).to.equal('Succeeded');
    const np = pods[pods.length - 1]!;
    const out = np.logs.get('main') ?? '';
    expect(out).to.contain('one\ntwo\n');
    expect(out).to.contain('id=65532:3000 groups=3000 2000');
    expect(out).to.contain('pwd=/work greeting=from-image override=spec combined=from-image-x');
    expect(out).to.match(/removed\.txt: No such file/);
    expect(out).to.contain('opq=new.txt kept=upper');
    expect(out).to.contain('rootfs=ro');
    expect(out).to.contain('shared=rw');
    expect(out).to.contain('CapEff:\t0000000000000000');
    expect(out).to.contain('NoNewPrivs:\t1');
    expect(out).to.contain('hostname=full');
    expect(np.logs.get('other')).to.equal('1234\n');
    expect(cs(done, 'first').state.terminated.reason).to.equal('Completed');
    expect(cs(done, 'main').imageID).to.match(/node\/busybox@sha256:[0-9a-f]{64}$/);
    expect(cs(done, 'main').containerID).to.match(/^runc:\/\//);
  });

  it('gives each pod its own network namespace reachable from the host; tcp readiness and exec liveness probes', async () => {
    const h = hostWithSecret();
    const started = Date.now();
    const np = start(
      pod({
        restartPolicy: 'Always',
        terminationGracePeriodSeconds: 1,
        imagePullSecrets: [{ name: 'regcred' }],
        containers: [
          {
            name: 'web',
            image: img,
            args: ['touch /tmp/alive; echo started; exec nc -ll -p 8080 -e echo hello-from-pod'],
            ports: [{ containerPort: 8080 }],
            readinessProbe: { tcpSocket: { port: 8080 }, periodSeconds: 1 },
            livenessProbe: { exec: { command: ['test', '-f', '/tmp/alive'] }, periodSeconds: 1, failureThreshold: 1 },
            volumeMounts: [{ name: 'tmp', mountPath: '/tmp' }],
          },
        ],
        volumes: [{ name: 'tmp', emptyDir: {} }],
      }),
      h,
    );
    const ready = await h.until('Ready', (s) => s.conditions?.some((c: KubeObject) => c.type === 'Ready' && c.status === 'True'));
    console.log(`      pod (image cached) to Ready: ${Date.now() - started} ms`);
    expect(ready.podIP).to.match(/^198\.1[89]\./);
    expect(ready.podIP).to.equal(np.ip);
    const reply = await new Promise<string>((resolve, reject) => {
      const s = connect({ host: np.ip, port: 8080 });
      let text = '';
      s.on('data', (d: Buffer) => (text += d.toString()));
      s.on('end', () => resolve(text));
      s.on('error', reject);
    });
    expect(reply).to.equal('hello-from-pod\n');
    // The liveness probe fails once /tmp/alive is gone: the container is killed and restarted (Always).
    await run(node.runc, ['--root', node.stateRoot, 'exec', np.containerIds()[0]!, 'rm', '/tmp/alive']);
    const restarted = await h.until('restart', (s) => cs(s, 'web').restartCount >= 1);
    expect(cs(restarted, 'web').lastState.terminated.message).to.contain('failed liveness probe');
    expect(cs(restarted, 'web').lastState.terminated.exitCode).to.be.oneOf([137, 143]);
  });

  it('a crashing container goes to CrashLoopBackOff with the exit code in lastState', async () => {
    const h = hostWithSecret();
    start(pod({ restartPolicy: 'Always', imagePullSecrets: [{ name: 'regcred' }], containers: [{ name: 'c', image: img, args: ['echo bye; exit 3'] }] }), h);
    const s = await h.until('CrashLoopBackOff', (x) => cs(x, 'c').state?.waiting?.reason === 'CrashLoopBackOff' && cs(x, 'c').restartCount >= 2);
    expect(cs(s, 'c').lastState.terminated).to.include({ exitCode: 3, reason: 'Error' });
  });

  it('a failing init container fails the pod under restartPolicy Never, and is retried with back-off under Always', async () => {
    const spec = (restartPolicy: string): KubeObject =>
      pod({ restartPolicy, imagePullSecrets: [{ name: 'regcred' }], initContainers: [{ name: 'init', image: img, args: ['exit 4'] }], containers: [{ name: 'main', image: img, args: ['true'] }] });
    const never = hostWithSecret();
    start(spec('Never'), never);
    const failed = await never.until('Failed', (x) => x.phase === 'Failed');
    expect(cs(failed, 'init').state.terminated).to.include({ exitCode: 4, reason: 'Error' });
    expect(cs(failed, 'main').state.waiting.reason).to.equal('PodInitializing');
    expect(cs(failed, 'main').started).to.equal(false);
    const always = hostWithSecret();
    start(spec('Always'), always);
    const looping = await always.until('init CrashLoopBackOff', (x) => cs(x, 'init').state?.waiting?.reason === 'CrashLoopBackOff' && cs(x, 'init').restartCount >= 1);
    expect(looping.phase).to.equal('Pending');
    expect(cs(looping, 'init').lastState.terminated.exitCode).to.equal(4);
    expect(looping.conditions.find((c: KubeObject) => c.type === 'Initialized').status).to.equal('False');
  });

  it('a missing command in the image is StartError with exit 128', async () => {
    const h = hostWithSecret();
    start(pod({ imagePullSecrets: [{ name: 'regcred' }], containers: [{ name: 'c', image: img, command: ['/no/such/binary'] }] }), h);
    const s = await h.until('Failed', (x) => x.phase === 'Failed');
    expect(cs(s, 'c').state.terminated).to.include({ exitCode: 128, reason: 'StartError' });
    expect(cs(s, 'c').state.terminated.message).to.contain('/no/such/binary');
  });

  it('missing or wrong pull credentials: ErrImagePull, then ImagePullBackOff; fixed credentials then run', async () => {
    const none = new FakeHost();
    start(pod({ containers: [{ name: 'c', image: img, imagePullPolicy: 'Always', args: ['true'] }] }), none);
    const err = await none.until('ErrImagePull', (x) => cs(x, 'c').state?.waiting?.reason === 'ErrImagePull');
    expect(cs(err, 'c').state.waiting.message).to.match(/authentication required|unauthorized/i);
    await none.until('ImagePullBackOff', (x) => cs(x, 'c').state?.waiting?.reason === 'ImagePullBackOff');

    const wrong = new FakeHost();
    wrong.objects.set('secrets/default/bad', { '.dockerconfigjson': dockerConfigJson(registry.host, 'testuser', 'nope') });
    start(pod({ imagePullSecrets: [{ name: 'bad' }], containers: [{ name: 'c', image: img, imagePullPolicy: 'Always', args: ['true'] }] }), wrong);
    await wrong.until('ErrImagePull', (x) => cs(x, 'c').state?.waiting?.reason === 'ErrImagePull');
    await wrong.until('ImagePullBackOff', (x) => cs(x, 'c').state?.waiting?.reason === 'ImagePullBackOff');
    wrong.objects.set('secrets/default/bad', pullSecret); // credentials read once per pod: a new pod picks them up
    const fixed = new FakeHost();
    fixed.objects = wrong.objects;
    start(pod({ imagePullSecrets: [{ name: 'bad' }], containers: [{ name: 'c', image: img, imagePullPolicy: 'Always', args: ['true'] }] }), fixed);
    await fixed.until('Succeeded', (x) => x.phase === 'Succeeded');
  });

  it('CreateContainerConfigError for runAsNonRoot as root and for a missing ConfigMap, until it appears', async () => {
    const h = hostWithSecret();
    start(pod({ imagePullSecrets: [{ name: 'regcred' }], containers: [{ name: 'c', image: img, args: ['true'], securityContext: { runAsUser: 0, runAsNonRoot: true } }] }), h);
    const s = await h.until('CreateContainerConfigError', (x) => cs(x, 'c').state?.waiting?.reason === 'CreateContainerConfigError');
    expect(cs(s, 'c').state.waiting.message).to.contain('non-root');

    const h2 = hostWithSecret();
    start(
      pod({
        imagePullSecrets: [{ name: 'regcred' }],
        containers: [{ name: 'c', image: img, args: ['echo $V'], env: [{ name: 'V', valueFrom: { configMapKeyRef: { name: 'cm', key: 'k' } } }] }],
      }),
      h2,
    );
    const s2 = await h2.until('CreateContainerConfigError', (x) => cs(x, 'c').state?.waiting?.reason === 'CreateContainerConfigError');
    expect(cs(s2, 'c').state.waiting.message).to.equal('configmap "cm" not found');
    h2.objects.set('configmaps/default/cm', { k: 'from-configmap' });
    await h2.until('Succeeded', (x) => x.phase === 'Succeeded');
    expect(pods[pods.length - 1]!.logs.get('c')).to.equal('from-configmap\n');
  });

  it('applies resources.limits as cgroup limits; a container over its memory limit is OOMKilled (exit 137)', async () => {
    const h = hostWithSecret();
    const np = start(
      pod({
        imagePullSecrets: [{ name: 'regcred' }],
        containers: [
          { name: 'limits', image: img, args: ['cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/cpu/cpu.cfs_quota_us'], resources: { limits: { memory: '48Mi', cpu: '500m' }, requests: { cpu: '250m' } } },
          // The node sees an OOM kill through `runc events`, which it starts once the container runs: the
          // hog waits so that a loaded machine cannot kill it before the watch is in place. A CI run saw
          // exit 137 reported as Error with a wait of one second (2026-12-02, a machine whose process
          // starts were slow: `node -e 0` took 110 ms), so it waits three.
          { name: 'hog', image: img, args: ['sleep 3; x=$(head -c 200000000 /dev/zero | tr "\\0" a); echo survived'], resources: { limits: { memory: '32Mi' } } },
        ],
      }),
      h,
    );
    const s = await h.until('both terminated', (x) => x.phase === 'Failed' || x.phase === 'Succeeded');
    expect(np.logs.get('limits')).to.equal(`${48 * 1024 * 1024}\n50000\n`);
    expect(cs(s, 'hog').state.terminated).to.include({ exitCode: 137, reason: 'OOMKilled' });
    expect(np.logs.get('hog') ?? '').to.not.contain('survived');
  });

  it('a pod deleted at any point of its start (sandbox, pull, create, run) stops and leaves nothing behind', async () => {
    for (const delayMs of [0, 20, 60, 120, 250, 400]) {
      const h = hostWithSecret();
      const np = start(pod({ restartPolicy: 'Always', imagePullSecrets: [{ name: 'regcred' }], containers: [{ name: 'c', image: img, imagePullPolicy: 'Always', args: ['sleep 1000'] }] }), h);
      await new Promise((r) => setTimeout(r, delayMs));
      const t = Date.now();
      await np.terminate(2);
      expect(Date.now() - t, `terminate after ${delayMs} ms`).to.be.lessThan(15_000);
      expect(np.containerIds(), `after ${delayMs} ms`).to.deep.equal([]);
      if (np.netns) expect((await run('ip', ['netns', 'list'])).stdout, `after ${delayMs} ms`).to.not.contain(np.netns);
      const list = await run(node.runc, ['--root', node.stateRoot, 'list', '-q']);
      expect(list.stdout, `after ${delayMs} ms`).to.not.contain(np.runcPrefix);
      expect(readFileSync('/proc/self/mounts', 'utf8'), `after ${delayMs} ms`).to.not.contain(np.runcPrefix);
    }
  });

  it('graceful termination stops the containers and removes the network namespace, mounts and runc state', async () => {
    const h = hostWithSecret();
    const np = start(pod({ restartPolicy: 'Always', imagePullSecrets: [{ name: 'regcred' }], containers: [{ name: 'c', image: img, args: ['trap "exit 0" TERM; while true; do sleep 0.1; done'] }] }), h);
    await h.until('Running', (x) => cs(x, 'c').state?.running !== undefined);
    const id = np.containerIds()[0]!;
    const netnsName = np.netns!;
    expect((await run('ip', ['netns', 'list'])).stdout).to.contain(netnsName);
    await np.terminate(10);
    expect(cs(h.last, 'c').state.terminated).to.include({ exitCode: 0, reason: 'Completed' });
    expect(h.last.phase).to.equal('Succeeded');
    const list = await run(node.runc, ['--root', node.stateRoot, 'list', '-q']);
    expect(list.stdout.split('\n')).to.not.include(id);
    const netns = await run('ip', ['netns', 'list']);
    const mounts = readFileSync('/proc/self/mounts', 'utf8');
    expect(mounts).to.not.contain(id);
    expect(netns.stdout).to.not.contain(netnsName);
  });
});
