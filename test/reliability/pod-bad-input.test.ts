/**
 * The bad image-name corpus against the pod runtime on the real control plane: a real
 * `fnr serve` child process with only the pod runtime (pod-serve.ts: kube-apiserver behind the
 * bed's fault proxy, the control plane's node, a TLS registry with htpasswd auth). On the exec runtime every bad name is a map miss;
 * here names reach pod naming, the registry client and pod creation. Each must get a clean error
 * (never INTERNAL, UNKNOWN or UNAVAILABLE, never a hang), the server stays healthy, and no pod or
 * Service is left behind for an invalid name.
 *
 * No name leaves the machine: the corpus's registry host (example.com, any case) is the test
 * registry's <host>/fn (so example.com/cat:v1 is the bed's cat function), and a name that would
 * go to Docker Hub (no host) gets the test registry's host in front.
 *
 * The same server runs at --log-level=4 with the registry credentials (user testuser, password
 * testpass): its stderr must never contain the password, its base64 form or the docker config
 * "auth" string ("Secrets never logged", on the pod runtime).
 */
import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {parseImageReference} from '../../src/lib/registry/reference.js'
import {checkHealth, healthClient} from '../support/health.js'
import {waitForClusterBinaries} from '../support/cluster/shared.js'
import {closeGate, listPods, listServices} from '../support/pods/cluster-bed.js'
import {RL} from '../support/pods/index.js'
import {imageCases, type ImageCase} from '../support/reliability/inputs.js'
import {POD_SERVE_FUNCTIONS, leakProblems, startPodServeBed, type PodServeBed} from '../support/reliability/pod-serve.js'
import type {ServeChild} from '../support/reliability/serve-process.js'
import {registerSummary, tally, withinHangLimit} from '../support/reliability/tally.js'

registerSummary()

const S = grpc.status
const CODE_NAMES = Object.fromEntries(Object.entries(S).map(([k, v]) => [v, k])) as Record<number, string>

const PASSWORD = 'testpass'
const SECRETS = {
  password: PASSWORD,
  'password in base64': Buffer.from(PASSWORD).toString('base64'),
  'docker config auth (base64 of user:password)': Buffer.from(`testuser:${PASSWORD}`).toString('base64'),
}

/** The name sent to the pod runtime: the corpus name, re-homed to the test registry. */
function rehome(image: string, host: string): string {
  const swapped = image.replace(/example\.com/gi, `${host}/fn`)
  if (swapped !== image) return swapped
  try {
    // a valid reference without a registry host would go to Docker Hub: give it the test registry's
    const ref = parseImageReference(image.trim())
    if (ref.registry === 'docker.io' && !/^(docker\.io|index\.docker\.io|registry-1\.docker\.io)\//i.test(image.trim())) return `${host}/${image.trim()}`
    return image.replace(ref.registry, host)
  } catch {
    return image // not a reference: it never reaches a registry
  }
}

/**
 * What the pod runtime answers for a name: not a valid reference → INVALID_ARGUMENT (before any
 * registry or API call); a valid reference the registry does not have → FAILED_PRECONDITION; a
 * function of the bed → OK. fnr serve trims white space around a name once, for every runtime (it
 * used to reach the pod runtime untrimmed: the registry client found the image, but the pod was made
 * with the untrimmed name, which the kubelet could not pull), so a valid name with white space
 * around it is that name.
 */
function expected(sent: string): {code: number; message: RegExp} {
  const name = sent.trim()
  try {
    parseImageReference(name)
  } catch {
    return {code: S.INVALID_ARGUMENT, message: /^(invalid image reference |image is empty|image is \d+ characters long)/}
  }
  if (FUNCTIONS.has(name)) return {code: S.OK, message: /^$/}
  return {code: S.FAILED_PRECONDITION, message: /not found|unknown|MANIFEST_UNKNOWN|NAME_UNKNOWN/i}
}
/** The bed's function images (set in before()). */
const FUNCTIONS = new Set<string>()

describe('reliability: bad image names on the pod runtime (fnr serve → the real control plane)', function () {
  this.timeout(600_000)
  waitForClusterBinaries()
  let psb: PodServeBed
  let serve: ServeChild
  let ns: string
  let client: EvaluatorClient
  let health: ReturnType<typeof healthClient>
  /** Images of the calls that succeeded: the only ones that may have pods. */
  const okImages = new Set<string>()

  before(async function () {
    this.timeout(180_000)
    psb = await startPodServeBed()
    for (const name of POD_SERVE_FUNCTIONS) FUNCTIONS.add(psb.image(name))
    ns = await psb.pb.namespace()
    await closeGate(psb.pb)
    serve = await psb.start(ns, 'bad-names', ['--log-level=4', '--scan-interval=1s'])
    client = new EvaluatorClient(`127.0.0.1:${serve.port}`, {maxMessageSize: 64 * 1024 * 1024})
    health = healthClient(`127.0.0.1:${serve.port}`)
  })
  after(async () => {
    client?.close()
    health?.close()
    if (serve && serve.child.exitCode === null && serve.child.signalCode === null) serve.child.kill('SIGKILL')
    await psb?.stop()
  })

  const cases: ImageCase[] = imageCases()

  it(`${cases.length} bad image names: each a clean error (the exact code: see expected()), the server healthy, no pod or Service for a bad name`, async () => {
    const failures: string[] = []
    const outcomes: Record<string, number> = {}
    for (const c of cases) {
      tally.tried('grpc image', {image: c.image}, {valid: c.codes.every((x) => x === S.OK)})
      const sent = rehome(c.image, psb.registry.host)
      const want = expected(sent)
      const label = `pod runtime: image ${c.label} (${JSON.stringify(sent.slice(0, 120))})`
      let code: number
      let details = ''
      try {
        await withinHangLimit(label, client.evaluateRaw(sent, RL, {deadline: Date.now() + 60_000}))
        code = S.OK
        okImages.add(sent)
      } catch (err) {
        const e = err as grpc.ServiceError
        if (typeof e.code !== 'number') throw err
        code = e.code
        details = e.details ?? ''
      }
      outcomes[CODE_NAMES[code]!] = (outcomes[CODE_NAMES[code]!] ?? 0) + 1
      if (code === S.UNKNOWN || code === S.UNAVAILABLE || code === S.INTERNAL) tally.crash(label, `${CODE_NAMES[code]}: ${details.slice(0, 300)}`)
      if (code !== want.code) failures.push(`${label}: ${CODE_NAMES[code]} (expected ${CODE_NAMES[want.code]}) ${details.slice(0, 300)}`)
      else if (code !== S.OK && (!want.message.test(details) || Buffer.byteLength(details) > 8 * 1024)) failures.push(`${label}: status message ${JSON.stringify(details.slice(0, 300))} (${Buffer.byteLength(details)} bytes) does not match ${want.message}`)
      const status = await withinHangLimit(`${label}: health`, checkHealth(health))
      if (status !== 'SERVING') {
        tally.crash(label, `health ${status}`)
        failures.push(`${label}: health ${status}`)
      }
    }
    process.stdout.write(`      (outcomes: ${JSON.stringify(outcomes)})\n`)
    expect(failures, failures.join('\n')).to.deep.equal([])
    // a good call still works, and the only pods (and their Services) are those of the names that worked
    const good = await client.evaluateRaw(psb.image('cat'), RL, {deadline: Date.now() + 60_000})
    expect(good.resourceList.toString()).to.equal(RL.toString())
    okImages.add(psb.image('cat'))
    const pods = await listPods(psb.pb, ns, {includeDeleting: true})
    const strays = pods.filter((p) => !okImages.has(p.metadata!.annotations?.['fnr.dev/image'] ?? '?')).map((p) => `${p.metadata!.name} (${p.metadata!.annotations?.['fnr.dev/image']})`)
    expect(strays, 'pods for names that failed').to.deep.equal([])
    expect((await listServices(psb.pb, ns)).length, 'one Service per pod').to.equal(pods.length)
    expect(await leakProblems(psb.pb, ns, 1)).to.deep.equal([])
  })

  it('never logs the registry password, its base64 form or the docker config auth string (--log-level=4)', async () => {
    // calls that use the credentials: a fresh image (manifest fetch with auth, pull Secret), one
    // missing from the registry, one the registry refuses to name
    await client.evaluateRaw(psb.image('stderr'), RL, {deadline: Date.now() + 60_000})
    await client.evaluateRaw(`${psb.registry.host}/fn/missing:v1`, RL, {deadline: Date.now() + 60_000}).catch(() => undefined)
    await client.evaluateRaw(psb.image('fail'), RL, {deadline: Date.now() + 60_000}).catch(() => undefined)
    serve.child.kill('SIGTERM')
    expect((await serve.exited).code).to.equal(0)
    const logs = serve.stderr()
    // the check means something: debug lines were written, about the registry among others
    expect(logs).to.contain('"level":"debug"')
    expect(logs).to.contain(psb.registry.host)
    for (const [what, secret] of Object.entries(SECRETS)) expect(logs.includes(secret), `${what} in the logs`).to.equal(false)
  })
})
