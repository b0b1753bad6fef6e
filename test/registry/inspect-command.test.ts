/**
 * `fnr image inspect` as a child process (run from source by test/support/registry/run-inspect.ts)
 * against real registries: text and JSON output, flags, exit codes and one-line errors.
 */
import {copyFile, mkdir} from 'node:fs/promises'
import path from 'node:path'
import {fileURLToPath} from 'node:url'

import {expect} from 'chai'
import {execa} from 'execa'

import {seedImages, type SeededImages} from '../support/registry/fixtures.js'
import {TestRegistry} from '../support/registry/registry.js'

const RUN_INSPECT = path.join(path.dirname(fileURLToPath(import.meta.url)), '../support/registry/run-inspect.ts')

interface Result {
  exitCode: number
  stdout: string
  stderr: string
}

async function inspect(args: string[], env: Record<string, string | undefined> = {}): Promise<Result> {
  const baseEnv = {...process.env, REGISTRY_AUTH_FILE: undefined, DOCKER_CONFIG: undefined, FNR_DEBUG: undefined, ...env}
  const r = await execa(process.execPath, ['--import', 'tsx', RUN_INSPECT, ...args], {reject: false, timeout: 60_000, env: baseEnv, extendEnv: false, stdin: 'ignore', stripFinalNewline: false})
  return {exitCode: r.exitCode ?? -1, stdout: String(r.stdout), stderr: String(r.stderr)}
}

describe('fnr image inspect', function () {
  let plain: TestRegistry
  let secure: TestRegistry
  let images: SeededImages
  let authFile: string

  before(async function () {
    plain = await TestRegistry.start({mode: 'none'})
    images = await seedImages(plain, {full: true})
    secure = await TestRegistry.start({mode: 'tls'})
    authFile = await secure.writeAuthFile('testuser', 'testpass')
    await seedImages(secure, {authFile})
  })

  after(async function () {
    await plain?.stop()
    await secure?.stop()
  })

  it('prints digest, platform, entrypoint/cmd, size and the wrapper command', async function () {
    const r = await inspect(['--insecure-registry', plain.host, `${plain.host}/fn/hello:v1`])
    expect(r.stderr).to.equal('')
    expect(r.exitCode).to.equal(0)
    const size = images.hello.config.size + images.hello.layers[0]!.size
    expect(r.stdout).to.equal(
      [
        `Image:      ${plain.host}/fn/hello:v1`,
        `Reference:  ${plain.host}/fn/hello:v1`,
        `Digest:     ${images.hello.manifest.digest}`,
        'Media type: application/vnd.oci.image.manifest.v1+json',
        `Pinned:     ${plain.host}/fn/hello@${images.hello.manifest.digest}`,
        'Platform:   linux/amd64',
        'Entrypoint: ["/bin/fn"]',
        'Cmd:        ["--verbose"]',
        `Size:       ${size} B (config and 1 compressed layer)`,
        'Created:    2026-01-01T00:00:00Z',
        'Command:    /bin/fn --verbose',
        'Wrapper:    /wrapper-server-tools/wrapper-server --port 9446 --max-request-body-size 6291456 -- /bin/fn --verbose',
        '',
      ].join('\n'),
    )
  })

  it('prints JSON with --json, and picks --platform from an index', async function () {
    const r = await inspect(['--json', '--platform', 'linux/arm64', '--insecure-registry', plain.host, `${plain.host}/fn/multi:v1`])
    expect(r.exitCode, r.stderr).to.equal(0)
    const out = JSON.parse(r.stdout) as Record<string, unknown>
    expect(out).to.include({digest: images.multi.images[1]!.manifest.digest, mediaType: 'application/vnd.oci.image.manifest.v1+json'})
    expect(out.platform).to.deep.equal({os: 'linux', architecture: 'arm64'})
    expect(out.index).to.deep.equal({digest: images.multi.index.digest, mediaType: 'application/vnd.oci.image.index.v1+json', platforms: ['linux/amd64', 'linux/arm64']})
    expect(out.entrypoint).to.deep.equal(['/fn-arm64'])
    expect(out.command).to.deep.equal(['/fn-arm64'])
    expect(out.wrapper).to.deep.equal({command: ['/wrapper-server-tools/wrapper-server'], args: ['--port', '9446', '--max-request-body-size', '6291456', '--', '/fn-arm64']})
  })

  it('uses --auth-file and --ca-file for a private registry with its own CA', async function () {
    const r = await inspect(['--auth-file', authFile, '--ca-file', secure.ca!.certFile, '--json', `${secure.host}/fn/hello:v1`])
    expect(r.exitCode, r.stderr).to.equal(0)
    expect((JSON.parse(r.stdout) as {digest: string}).digest).to.equal(images.hello.manifest.digest)
  })

  it('honours REGISTRY_AUTH_FILE and DOCKER_CONFIG when --auth-file is not given', async function () {
    const viaEnv = await inspect(['--ca-file', secure.ca!.certFile, '--json', `${secure.host}/fn/hello:v1`], {REGISTRY_AUTH_FILE: authFile})
    expect(viaEnv.exitCode, viaEnv.stderr).to.equal(0)
    // DOCKER_CONFIG is a directory holding config.json.
    const dockerDir = path.join(secure.dir, 'docker')
    await mkdir(dockerDir)
    await copyFile(authFile, path.join(dockerDir, 'config.json'))
    const viaDockerConfig = await inspect(['--ca-file', secure.ca!.certFile, `${secure.host}/fn/hello:v1`], {DOCKER_CONFIG: dockerDir})
    expect(viaDockerConfig.exitCode, viaDockerConfig.stderr).to.equal(0)
    const noConfigJson = await inspect(['--ca-file', secure.ca!.certFile, `${secure.host}/fn/hello:v1`], {DOCKER_CONFIG: path.join(secure.dir, 'tls')})
    expect(noConfigJson.exitCode).to.equal(5)
    expect(noConfigJson.stderr).to.match(/requires authentication .* and no credentials were given/)
  })

  const failures: Array<[string, () => string[], number, (host: string) => string | RegExp]> = [
    ['a missing image', () => ['--insecure-registry', plain.host, `${plain.host}/fn/hello:nope`], 4, (h) => `fnr: image "${h}/fn/hello:nope" not found in registry ${h} (MANIFEST_UNKNOWN: manifest unknown)`],
    [
      'an image with neither Entrypoint nor Cmd',
      () => ['--insecure-registry', plain.host, `${plain.host}/fn/neither:v1`],
      3,
      (h) => `fnr: image "${h}/fn/neither:v1" has neither Entrypoint nor Cmd in its config, so there is no function to run`,
    ],
    ['a bad reference', () => ['Not/Valid'], 2, () => /^fnr: invalid image reference "Not\/Valid": /],
    ['a bad platform', () => ['--platform', 'linux', 'alpine'], 2, () => /^fnr: invalid platform "linux"/],
    ['a plain-HTTP registry not listed as insecure', () => [`${plain.host}/fn/hello:v1`], 3, () => /^fnr: TLS handshake with registry .* the server does not speak TLS/],
    ['a missing auth file', () => ['--auth-file', '/nonexistent/auth.json', 'alpine'], 3, () => 'fnr: registry auth file /nonexistent/auth.json does not exist'],
    ['a bad CA file', () => ['--ca-file', '/etc/hostname', 'alpine'], 3, () => /^fnr: CA file \/etc\/hostname: failed to append certificates from PEM/],
  ]
  for (const [what, args, code, message] of failures) {
    it(`exits ${code} with a one-line reason for ${what} (with --json: the same code, the error as JSON on stdout)`, async function () {
      const r = await inspect(args())
      expect(r.stdout).to.equal('')
      expect(r.exitCode, r.stderr).to.equal(code)
      const lines = r.stderr.trimEnd().split('\n')
      expect(lines, r.stderr).to.have.length(1)
      const want = message(plain.host)
      if (typeof want === 'string') expect(lines[0]).to.equal(want)
      else expect(lines[0]).to.match(want)

      // --json: the same exit code and stderr line, and the error as the one JSON object on stdout.
      const j = await inspect(['--json', ...args()])
      expect(j.exitCode, j.stderr).to.equal(code)
      expect(j.stderr).to.equal(r.stderr)
      const out = JSON.parse(j.stdout) as {error: {kind: string; message: string; exitCode: number}}
      expect(Object.keys(out)).to.deep.equal(['error'])
      expect(out.error.exitCode).to.equal(code)
      expect(`fnr: ${out.error.message}`).to.equal(lines[0]!.replace(/ \(see --help\)$/, ''))
    })
  }

  it('exits 5 for a wrong password and 3 without the CA', async function () {
    const wrong = await secure.writeAuthFile('testuser', 'wrong', 'wrong.json')
    const r = await inspect(['--auth-file', wrong, '--ca-file', secure.ca!.certFile, `${secure.host}/fn/hello:v1`])
    expect(r.exitCode).to.equal(5)
    expect(r.stderr).to.match(/^fnr: registry .* rejected the credentials from .*wrong\.json for image/)
    const noCa = await inspect(['--auth-file', authFile, `${secure.host}/fn/hello:v1`])
    expect(noCa.exitCode).to.equal(3)
    expect(noCa.stderr).to.match(/^fnr: TLS certificate of registry .* is not trusted/)
  })

  it('exits 8 when the registry is down', async function () {
    const down = await TestRegistry.start({mode: 'none'})
    const host = down.host
    await down.stop()
    const r = await inspect(['--insecure-registry', host, `${host}/fn/hello:v1`])
    expect(r.exitCode).to.equal(8)
    expect(r.stderr).to.match(new RegExp(`^fnr: registry ${host} is unreachable for image "${host}/fn/hello:v1": connect ECONNREFUSED .* \\(3 attempts\\)\\n$`))
  })
})
