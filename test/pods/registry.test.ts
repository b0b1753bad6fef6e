import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import {RegistryMetadataSource} from '../../src/lib/pods/cluster/image-metadata.js'
import {DockerConfig} from '../../src/lib/registry/auth.js'
import {RegistryClient} from '../../src/lib/registry/client.js'
import {waitForClusterBinaries} from '../support/cluster/shared.js'
import {closeGate, listPods, startClusterPodBed, startClusterRuntime, wrapped, type ClusterPodBed} from '../support/pods/cluster-bed.js'
import {RL, image, type RuntimeHandle} from '../support/pods/index.js'
import {seedImages} from '../support/registry/fixtures.js'
import {TestRegistry} from '../support/registry/registry.js'
import {writeExecutable} from '../support/tmp.js'

/** The node's mapping of a function image: `commandMap` for its own paths, behind the real wrapper (as the bed's images). */

describe('pod runtime with entrypoints from a real registry (docker-registry)', function () {
  this.timeout(120_000)
  waitForClusterBinaries()
  let registry: TestRegistry
  let pb: ClusterPodBed
  let h: RuntimeHandle | undefined
  let client: RegistryClient

  before(async () => {
    registry = await TestRegistry.start({mode: 'none'})
    await seedImages(registry, {full: true})
    pb = await startClusterPodBed()
    client = new RegistryClient({insecureRegistries: [registry.host], retryDelayMs: 5})
  })
  after(async () => {
    await h?.close()
    await pb?.stop()
    await registry?.stop()
  })
  beforeEach(() => closeGate(pb))

  it('runs the image\'s Entrypoint + Cmd after "--" in the function container', async () => {
    const img = `${registry.host}/fn/hello:v1`
    const fn = await writeExecutable(`${pb.dir}/hello-fn`, '#!/bin/sh\necho "args: $*" >&2\nexec cat\n')
    pb.kubelet.setImage(img, wrapped({'/bin/fn': fn}))
    const ns = await pb.namespace()
    h = await startClusterRuntime(pb, {namespace: ns, metadata: new RegistryMetadataSource(client)})
    const res = await h.evaluator.evaluate({image: img, resourceList: RL, deadline: Date.now() + 60_000})
    expect(res.resourceList.toString()).to.equal(RL.toString())
    expect(res.log.toString()).to.equal('args: --verbose\n')
    const fnContainer = (await listPods(pb, ns))[0]!.spec!.containers.find((c) => c.name === 'function')!
    expect(fnContainer.args!.slice(-3)).to.deep.equal(['--', '/bin/fn', '--verbose'])
    expect(fnContainer.image).to.equal(img)
  })

  it('an image without a command, or one the registry does not have, is FAILED_PRECONDITION without a pod (never NotFound)', async () => {
    const ns = await pb.namespace()
    await h?.close()
    h = await startClusterRuntime(pb, {namespace: ns, metadata: new RegistryMetadataSource(client)})
    for (const [img, text] of [
      [`${registry.host}/fn/neither:v1`, 'neither Entrypoint nor Cmd'],
      [`${registry.host}/fn/missing:v1`, 'fn/missing:v1'],
    ] as const) {
      const err = await h.evaluator.evaluate({image: img, resourceList: RL}).catch((e: unknown) => e)
      expect(err, img).to.be.instanceOf(FnrError)
      expect((err as FnrError).kind, (err as FnrError).message).to.equal('FailedPrecondition')
      expect((err as FnrError).message).to.contain(text)
    }
    expect(await listPods(pb, ns)).to.deep.equal([])
  })
})

describe('pod runtime with private registries: the image pull Secret', function () {
  this.timeout(120_000)
  waitForClusterBinaries()
  let pb: ClusterPodBed
  let h: RuntimeHandle | undefined

  before(async () => {
    pb = await startClusterPodBed()
  })
  after(async () => {
    await h?.close()
    await pb?.stop()
  })

  it('creates the pull Secret once and attaches it only to pods whose registry it has credentials for', async () => {
    const json = Buffer.from(JSON.stringify({auths: {'example.com': {auth: Buffer.from('u:p').toString('base64')}}}))
    const ns = await pb.namespace()
    pb.kubelet.setImage('other.example.org/fn/cat:v1', wrapped({'/usr/local/bin/function': `${pb.dir}/functions/cat`}))
    h = await startClusterRuntime(pb, {
      namespace: ns,
      pullSecret: {name: 'auth-secret', dockerConfig: DockerConfig.parse(json, 'test'), dockerConfigJson: json},
      metadata: {describe: async () => ({command: ['/usr/local/bin/function']})},
    })
    await h.evaluator.evaluate({image: image('cat'), resourceList: RL})
    await h.evaluator.evaluate({image: image('stderr'), resourceList: RL})
    await h.evaluator.evaluate({image: 'other.example.org/fn/cat:v1', resourceList: RL})
    const secret = (await pb.admin.get(`/api/v1/namespaces/${ns}/secrets/auth-secret`)) as {type: string; data: Record<string, string>}
    expect(secret.type).to.equal('kubernetes.io/dockerconfigjson')
    expect(Buffer.from(secret.data['.dockerconfigjson']!, 'base64').equals(json)).to.equal(true)
    const byImage = Object.fromEntries((await listPods(pb, ns)).map((p) => [p.spec!.containers.find((c) => c.name === 'function')!.image, p.spec!.imagePullSecrets ?? []]))
    expect(byImage[image('cat')]).to.deep.equal([{name: 'auth-secret'}])
    expect(byImage[image('stderr')]).to.deep.equal([{name: 'auth-secret'}])
    expect(byImage['other.example.org/fn/cat:v1']).to.deep.equal([])
  })
})
