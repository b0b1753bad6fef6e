// @kubernetes/client-node 2.x (undici) raises no warning of its own on current Node: 1.x's
// dependencies (node-fetch, whatwg-url) raised DEP0040 and DEP0169, which fnr used to drop, and
// which broke the CLI's one-line error form. A fresh process loads it, as `fnr pods` and `fnr serve`
// do, and calls an API server that refuses the connection.
import {expect} from 'chai'
import {spawnSync} from 'node:child_process'
import {fileURLToPath} from 'node:url'

const CLIENT = fileURLToPath(new URL('../../src/lib/k8s/client.ts', import.meta.url))

describe('client-node: no warnings of its own', () => {
  it('loading it and a request that fails print no warning', function () {
    this.timeout(20_000)
    const script = `
      const seen = []
      process.on('warning', (w) => seen.push(w.code ?? w.name))
      const net = await import('node:net')
      const probe = net.createServer().listen(0, '127.0.0.1')
      await new Promise((r) => probe.once('listening', r))
      const port = probe.address().port
      await new Promise((r) => probe.close(r))
      const {loadClientNode} = await import(${JSON.stringify(CLIENT)})
      const m = await loadClientNode()
      const kc = new m.KubeConfig()
      kc.loadFromOptions({clusters: [{name: 'c', server: 'https://127.0.0.1:' + port}], users: [{name: 'u', token: 't'}], contexts: [{name: 'x', cluster: 'c', user: 'u'}], currentContext: 'x'})
      const failed = await kc.makeApiClient(m.CoreV1Api).listNamespacedPod({namespace: 'default'}).then(() => 'answered', (e) => e.cause?.code ?? e.code ?? 'error')
      await new Promise((r) => setTimeout(r, 50))
      console.log(JSON.stringify({failed, seen}))`
    for (const mode of ['bundle', 'package']) {
      const run = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {encoding: 'utf8', env: {...process.env, FNR_CLIENT_NODE: mode === 'package' ? 'package' : ''}})
      expect(run.status, run.stderr).to.equal(0)
      expect(JSON.parse(run.stdout.trim().split('\n').at(-1)!), mode).to.deep.equal({failed: 'ECONNREFUSED', seen: []})
      expect(run.stderr, mode).to.not.match(/Warning/)
    }
  })
})
