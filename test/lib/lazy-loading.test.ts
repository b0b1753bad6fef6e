import {expect} from 'chai'
import {readFile} from 'node:fs/promises'
import path from 'node:path'

import {REPO_ROOT} from '../support/serve.js'

/** A fast path's bundle, after checking it holds neither the Kubernetes client, gRPC nor oclif. */
async function readFastBundle(command: 'eval' | 'render'): Promise<string> {
  const bundle = await readFile(path.join(REPO_ROOT, 'dist', 'bundles', command, `fast-${command}.bundle.mjs`), 'utf8')
  expect(bundle.length).to.be.greaterThan(10_000)
  expect(bundle).not.to.match(/CoreV1Api|@kubernetes\/client-node/)
  expect(bundle).not.to.match(/@grpc\/grpc-js|grpc\.health\.v1/)
  expect(bundle).not.to.match(/@oclif\/core/)
  return bundle
}

describe('heavy modules stay off the eval path', () => {
  it('the fnr eval bundle contains neither the Kubernetes client nor gRPC', async () => {
    const bundle = await readFastBundle('eval')
    // schema validation (src/lib/schema/) and ajv load only where a config is validated
    expect(bundle).not.to.match(/\bajv\b|x-kubernetes-validations/)
  })

  it('the fnr render bundle contains neither the Kubernetes client, gRPC nor oclif (--runner goes through oclif)', async () => {
    await readFastBundle('render')
  })

  it('the fnr serve bundle leaves the pod runtime, the Kubernetes client, metrics, the response cache and tracing to chunks loaded on first use, holds no protobufjs, and imports no built-in module as an ES module', async () => {
    const dir = path.join(REPO_ROOT, 'dist', 'bundles', 'serve')
    // the entry and the chunks it imports statically: what every start loads
    const eager = new Set<string>(['fast-serve.bundle.mjs'])
    const texts: string[] = []
    const walk = async (file: string): Promise<void> => {
      const text = await readFile(path.join(dir, file), 'utf8')
      texts.push(text)
      for (const m of text.matchAll(/^import (?:[^'"]*from )?"\.\/([^"]+)";?$/gm)) {
        if (eager.has(m[1]!)) continue
        eager.add(m[1]!)
        await walk(m[1]!)
      }
    }
    await walk('fast-serve.bundle.mjs')
    const loaded = texts.join('\n')
    expect(loaded).to.include('grpc.health.v1')
    expect(loaded).not.to.match(/CoreV1Api|class PodCache\b|node_modules\/(@opentelemetry|prom-client|lru-cache)\//)
    // the protocol's messages are coded by hand (src/lib/grpc/wire.ts): no .proto parsed at a start
    expect(loaded).not.to.match(/node_modules\/(protobufjs|@protobufjs|@grpc\/proto-loader|grpc-health-check)\//)
    // an ES import of a built-in builds its facade, reading every export: node:http's loads undici
    expect(loaded).not.to.match(/^import [^;]* from "(node:)?[a-z_/0-9]+";?$/m)
  })

  it('ajv is loaded on the first validation: no module imports it at load time', async () => {
    const {readdir} = await import('node:fs/promises')
    const files = (await readdir(path.join(REPO_ROOT, 'src'), {recursive: true})).filter((f) => f.endsWith('.ts'))
    const importing: string[] = []
    for (const f of files) {
      const text = await readFile(path.join(REPO_ROOT, 'src', f), 'utf8')
      if (/^import (?!type )[^\n]*from 'ajv'/m.test(text)) importing.push(f)
    }
    expect(importing).to.deep.equal([])
  })
})
