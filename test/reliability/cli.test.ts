/**
 * Every command with missing or contradictory flags and unreadable inputs: `fnr serve`,
 * `fnr wrapper-server`, `fnr eval`, `fnr test`, `fnr pods ls|gc|warm` and `fnr image inspect`, run
 * as the built CLI. Each must exit with the code of the README's table, print exactly one `fnr: `
 * line that says what is wrong, print no stack trace, and never hang. (Build first: npm run build.)
 * The pods commands point at a dead API server (a kubeconfig for a free loopback port: not port 1,
 * which client-node 2's fetch refuses as a "bad port" before connecting) or a broken
 * kubeconfig; the pod runtime of `fnr serve` too, for its config files (read before the API).
 *
 * Permission denied needs an unprivileged user: those cases run as nobody (uid 65534). A FIFO
 * with no writer is not a case for `fnr eval -i`/`--fn-config`: reading one blocks in every
 * program (cat too), and fnr keeps FIFOs readable so `--fn-config <(...)` works; the exec config
 * refuses FIFOs (it is read at server start).
 */
import {execFileSync} from 'node:child_process'
import {existsSync} from 'node:fs'
import {chmod, mkdir, symlink, truncate, writeFile} from 'node:fs/promises'
import net from 'node:net'
import path from 'node:path'

import {expect} from 'chai'

import {DEFAULT_STDIN, checkCliRun, runAll, type CliCase, type CliRun} from '../support/reliability/cli.js'
import {makeReliabilityFunctions} from '../support/reliability/functions.js'
import {LONG, registerSummary, tally} from '../support/reliability/tally.js'
import {freePort} from '../support/registry/tools.js'
import {TempDirs, writeExecutable} from '../support/tmp.js'

registerSummary()

const RL = 'apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a\n'

function bombWithJsonPath(): string {
  const lines = [
    'apiVersion: v1',
    'kind: ConfigMap',
    'metadata:',
    '  name: bomb',
    '  annotations:',
    '    config.kubernetes.io/path: bomb.json',
    'data:',
    '  l0: &l0 [lol]',
  ]
  for (let i = 1; i <= 9; i++) lines.push(`  l${i}: &l${i} [${Array.from({length: 10}, () => `*l${i - 1}`).join(', ')}]`)
  return `${lines.join('\n')}\n`
}

const deadKubeconfig = (port: number): string => `apiVersion: v1
kind: Config
clusters:
- name: dead
  cluster: {server: "https://127.0.0.1:${port}"}
contexts:
- name: dead
  context: {cluster: dead, user: u, namespace: default}
current-context: dead
users:
- name: u
  user: {token: not-a-token}
`

describe('reliability: the CLI with bad flags and unreadable inputs', function () {
  this.timeout(300_000)
  const temp = new TempDirs()
  const cases: CliCase[] = []
  let results = new Map<string, CliRun>()
  let occupied: net.Server
  let dir: string
  let canary: string

  // A path in the test's directory (made in before(), where the cases are built).
  const d = (p: string): string => path.join(dir, p)

  before(async function () {
    if (!existsSync(path.join(process.cwd(), 'dist', 'commands'))) throw new Error('build fnr first (npm run build): the CLI tests run bin/run.js')
    dir = await temp.make('fnr-rel-cli-')
    // nobody must be able to walk into it.
    await chmod(dir, 0o755)
    const fns = await makeReliabilityFunctions(dir)
    canary = d('canary')
    occupied = net.createServer().listen(0, '127.0.0.1')
    await new Promise((r) => occupied.once('listening', r))
    const busyPort = (occupied.address() as net.AddressInfo).port

    await mkdir(d('a-dir'))
    await mkdir(d('pkg'))
    await writeFile(d('pkg/cm.yaml'), 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n')
    await mkdir(d('pkg-unreadable'))
    await writeFile(d('pkg-unreadable/cm.yaml'), 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n')
    await chmod(d('pkg-unreadable/cm.yaml'), 0o000)
    await writeFile(d('unreadable.yaml'), 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: u\n')
    await chmod(d('unreadable.yaml'), 0o000)
    await writeFile(d('plain-file'), 'x')
    await writeFile(d('malformed.yaml'), 'apiVersion: v1\nkind: [\n')
    await writeFile(d('not-krm.yaml'), 'hello: world\n')
    await writeFile(d('two-docs.yaml'), 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n')
    await writeFile(d('bad-config.yaml'), 'functions:\n- function: ../../bin/sh\n  images: [x.io/sh:v1]\n')
    await writeFile(d('broken-config.yaml'), 'functions: [\n')
    await writeFile(d('unreadable-config.yaml'), 'functions: []\n')
    await chmod(d('unreadable-config.yaml'), 0o000)
    await writeFile(d('auth.json'), '{"auths": {')
    await writeFile(d('not-pem.crt'), 'this is not a certificate\n')
    await writeFile(d('noexec'), '#!/bin/sh\ncat\n')
    await writeExecutable(d('fn-cat'), '#!/bin/sh\nexec cat\n')
    await symlink('nowhere', d('dangling'))
    await symlink('loop', d('loop'))
    execFileSync('mkfifo', [d('config.fifo')])
    execFileSync('mkfifo', [d('any.fifo')])
    // over the 4 MiB limit for config files (sparse: the size says so without the bytes)
    await writeFile(d('big.yaml'), '')
    await truncate(d('big.yaml'), 5 * 1024 * 1024)
    await writeFile(d('dead.kubeconfig'), deadKubeconfig(await freePort()))
    await writeFile(d('broken.kubeconfig'), 'apiVersion: v1\nkind: [\n')
    await writeFile(d('pcc-broken.yaml'), '- name: example.com/fn:v1\n  timeToLive: [\n')
    await writeFile(d('pcc-scalar.yaml'), '42\n')
    await writeFile(d('pcc-no-name.yaml'), '- timeToLive: 5m\n')
    await writeFile(d('pcc-bad-waitlist.yaml'), '- name: example.com/fn:v1\n  maxWaitlistLength: lots\n')
    await writeFile(d('auth.json-ok'), '{"auths": {}}\n')
    await mkdir(d('tls-fifo'))
    execFileSync('mkfifo', [d('tls-fifo/ca.crt')])
    // fnr test: one good case, and cases with broken .expected/ files
    const testCase = async (suite: string, expected: Record<string, string> = {}): Promise<string> => {
      await mkdir(d(`${suite}/case/.expected`), {recursive: true})
      await writeFile(d(`${suite}/case/cm.yaml`), 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n')
      for (const [name, text] of Object.entries(expected)) await writeFile(d(`${suite}/case/.expected/${name}`), text)
      return d(suite)
    }
    const td = await testCase('td')
    const tdBadYaml = await testCase('td-bad-yaml', {'config.yaml': 'exitCode: [\n'})
    const tdBadTimeout = await testCase('td-bad-timeout', {'config.yaml': 'timeout: soon\n'})
    const tdFifo = await testCase('td-fifo')
    execFileSync('mkfifo', [d('td-fifo/case/.expected/config.yaml')])
    await mkdir(d('td-empty'))
    const long = `${'n'.repeat(300)}/${'n'.repeat(300)}`
    const config = [`--config=${fns.configPath}`, `--functions=${fns.functionsDir}`]
    const serve = ['serve', '--disable-runtimes=pod', '--log-level=0']
    // the pod runtime against a dead API server: its files are read (and refused) before the API is
    const podServe = ['serve', '--disable-runtimes=exec', '--port=0', '--log-level=0', `--kubeconfig=${d('dead.kubeconfig')}`]
    const wrapperImage = {WRAPPER_SERVER_IMAGE: 'fnr.test/wrapper-server:v1'}
    // An image the exec config does not map, with no container runtime (lib/container): refused as unmapped.
    const noContainers = {FNR_CONTAINER_RUNTIME: 'none'}
    const dead = `--kubeconfig=${d('dead.kubeconfig')}`
    const PCC = (why: string): RegExp => new RegExp(`^fnr: pod cache config .* \\(--pod-cache-config\\) cannot be read: ${why}`)

    cases.push(
      // fnr serve
      {label: 'serve: every runtime disabled', args: ['serve', '--disable-runtimes=exec,pod', '--port=0'], code: 3, message: /every runtime is disabled/},
      {label: 'serve: unknown runtime', args: ['serve', '--disable-runtimes=docker'], code: 2, message: /unknown runtime "docker"/},
      {label: 'serve: pod runtime without WRAPPER_SERVER_IMAGE', args: ['serve', '--disable-runtimes=exec', '--port=0'], env: {WRAPPER_SERVER_IMAGE: ''}, code: 3, message: /WRAPPER_SERVER_IMAGE/},
      {label: 'serve: port out of range', args: [...serve, '--port=70000'], code: 2, message: /port/i},
      {long: true, label: 'serve: negative port', args: [...serve, '--port=-1'], code: 2, message: /port/i},
      {label: 'serve: port is not a number', args: [...serve, '--port=abc'], code: 2, message: /port|integer/i},
      {long: true, label: 'serve: port without a value', args: [...serve, '--port'], code: 2, message: /port|value/i},
      {label: 'serve: port given twice', args: [...serve, '--port=1', '--port=2'], code: 2, message: /only be specified once/},
      {label: 'serve: log level out of range', args: ['serve', '--disable-runtimes=pod', '--log-level=9'], code: 2, message: /log-level/},
      {label: 'serve: message size below the minimum', args: [...serve, '--max-request-body-size=10'], code: 2, message: /max-request-body-size|1024/},
      {long: true, label: 'serve: message size not a number', args: [...serve, '--max-request-body-size=lots'], code: 2, message: /max-request-body-size|integer/},
      {label: 'serve: grace period not a duration', args: [...serve, '--grace-period=forever'], code: 2, message: /duration/},
      {long: true, label: 'serve: zero pod TTL', args: [...serve, '--pod-ttl=0s'], code: 2, message: /pod-ttl/},
      {label: 'serve: registry TLS without private registries', args: [...serve, '--enable-private-registries-tls=true'], code: 2, message: /needs --enable-private-registries/},
      {long: true, label: 'serve: boolean that is not one', args: [...serve, '--warm-up-pod-cache=maybe'], code: 2, message: /true or false/},
      {long: true, label: 'serve: pod address that is not an option', args: [...serve, '--pod-address=bogus'], code: 2, message: /pod-address|bogus/},
      {label: 'serve: unknown flag', args: [...serve, '--no-such-flag'], code: 2, message: /no-such-flag/},
      {label: 'serve: stray argument', args: [...serve, 'extra'], code: 2, message: /extra/},
      {label: 'serve: config file missing', args: [...serve, '--port=0', `--config=${d('missing.yaml')}`, `--functions=${fns.functionsDir}`], code: 3, message: /cannot read exec config .*ENOENT/},
      {long: true, label: 'serve: config is a directory', args: [...serve, '--port=0', `--config=${d('a-dir')}`, `--functions=${fns.functionsDir}`], code: 3, message: /cannot read exec config .*EISDIR/},
      {long: true, label: 'serve: config is a dangling symlink', args: [...serve, '--port=0', `--config=${d('dangling')}`, `--functions=${fns.functionsDir}`], code: 3, message: /cannot read exec config .*ENOENT/},
      {label: 'serve: config is a FIFO (used to block startup)', args: [...serve, '--port=0', `--config=${d('config.fifo')}`, `--functions=${fns.functionsDir}`], code: 3, message: /not a regular file/},
      {label: 'serve: config is malformed', args: [...serve, '--port=0', `--config=${d('broken-config.yaml')}`, `--functions=${fns.functionsDir}`], code: 3, message: /cannot parse exec config/},
      {label: 'serve: config entry escapes the functions directory', args: [...serve, '--port=0', `--config=${d('bad-config.yaml')}`, `--functions=${fns.functionsDir}`], code: 3, message: /"\.\." is not allowed/},
      {label: 'serve: functions directory missing', args: [...serve, '--port=0', `--config=${fns.configPath}`, `--functions=${d('missing-dir')}`], code: 3, message: /functions directory .* does not exist/},
      {label: 'serve: config unreadable (as nobody)', args: [...serve, '--port=0', `--config=${d('unreadable-config.yaml')}`, `--functions=${fns.functionsDir}`], asNobody: true, code: 3, message: /cannot read exec config .*EACCES/},
      // grpc-js used to print its own "E No address added out of total 1 resolved" line first.
      {onlyLine: true, label: 'serve: port in use', args: [...serve, `--port=${busyPort}`, ...config], env: {FNR_BIND_ADDRESS: '127.0.0.1'}, code: 8, message: /cannot listen on 127\.0\.0\.1:\d+: the address is already in use/},
      {label: 'serve: config over 4 MiB', args: [...serve, '--port=0', `--config=${d('big.yaml')}`, `--functions=${fns.functionsDir}`], code: 3, message: /cannot read exec config .*big\.yaml": it is 5 MiB, more than the limit of 4 MiB/},
      // fnr serve: the pod runtime's config files (the API server is dead; they are read first)
      {label: 'serve: pod cache config is a FIFO (used to hang the start) (--strict-config)', args: [...podServe, '--strict-config', `--pod-cache-config=${d('any.fifo')}`], env: wrapperImage, code: 3, message: PCC('not a regular file \\(it is a FIFO\\)$')},
      {label: 'serve: pod cache config is /dev/zero (used to be read to ~644 MB) (--strict-config)', args: [...podServe, '--strict-config', '--pod-cache-config=/dev/zero'], env: wrapperImage, code: 3, message: PCC('not a regular file \\(it is a character device\\)$')},
      {label: 'serve: pod cache config is a directory (--strict-config)', args: [...podServe, '--strict-config', `--pod-cache-config=${d('a-dir')}`], env: wrapperImage, code: 3, message: PCC('it is a directory \\(EISDIR\\)$')},
      {label: 'serve: pod cache config over 4 MiB (--strict-config)', args: [...podServe, '--strict-config', `--pod-cache-config=${d('big.yaml')}`], env: wrapperImage, code: 3, message: PCC('it is 5 MiB, more than the limit of 4 MiB for a config file$')},
      {label: 'serve: pod cache config is malformed YAML (--strict-config)', args: [...podServe, '--strict-config', `--pod-cache-config=${d('pcc-broken.yaml')}`], env: wrapperImage, code: 3, message: /pod cache config .*pcc-broken\.yaml is not valid YAML/},
      {label: 'serve: pod cache config is a YAML scalar (--strict-config)', args: [...podServe, '--strict-config', `--pod-cache-config=${d('pcc-scalar.yaml')}`], env: wrapperImage, code: 3, message: /pod cache config .*pcc-scalar\.yaml must be a YAML list/},
      {long: true, label: 'serve: pod cache config entry without a name', args: [...podServe, `--pod-cache-config=${d('pcc-no-name.yaml')}`], env: wrapperImage, code: 3, message: /entry 1: name: Required value/},
      {label: 'serve: pod cache config with a non-integer maxWaitlistLength (--strict-config)', args: [...podServe, '--strict-config', `--pod-cache-config=${d('pcc-bad-waitlist.yaml')}`], env: wrapperImage, code: 3, message: /maxWaitlistLength: Invalid value: "lots": must be an integer/},
      {label: 'serve: registry CA (ca.crt in --tls-secret-path) is a FIFO', args: [...podServe, '--pod-cache-config=', '--enable-private-registries=true', `--registry-auth-secret-path=${d('auth.json-ok')}`, '--enable-private-registries-tls=true', `--tls-secret-path=${d('tls-fifo')}`], env: wrapperImage, code: 3, message: /^fnr: CA file .*ca\.crt cannot be read: not a regular file \(it is a FIFO\)$/},
      // fnr serve: the listener's TLS files
      {label: 'serve: --tls-cert-file without --tls-key-file', args: [...serve, '--port=0', `--tls-cert-file=${d('not-pem.crt')}`], code: 2, message: /--tls-cert-file needs --tls-key-file/},
      {label: 'serve: TLS certificate is a FIFO (used to hang the start)', args: [...serve, '--port=0', ...config, `--tls-cert-file=${d('any.fifo')}`, `--tls-key-file=${d('not-pem.crt')}`], code: 3, message: /^fnr: --tls-cert-file .*any\.fifo cannot be read: not a regular file \(it is a FIFO\)$/},
      {label: 'serve: TLS key is /dev/zero', args: [...serve, '--port=0', ...config, `--tls-cert-file=${d('not-pem.crt')}`, '--tls-key-file=/dev/zero'], code: 3, message: /^fnr: --tls-(cert-file .*not-pem\.crt is not a PEM file|key-file \/dev\/zero cannot be read: not a regular file \(it is a character device\))/},
      {label: 'serve: TLS client CA is a directory', args: [...serve, '--port=0', ...config, `--tls-cert-file=${d('not-pem.crt')}`, `--tls-key-file=${d('not-pem.crt')}`, `--tls-client-ca-file=${d('a-dir')}`], code: 3, message: /^fnr: --tls-(cert-file .*not-pem\.crt is not a PEM file|key-file .* is not a PEM file|client-ca-file .*a-dir cannot be read: it is a directory \(EISDIR\))/},
      {label: 'serve: TLS certificate over 4 MiB', args: [...serve, '--port=0', ...config, `--tls-cert-file=${d('big.yaml')}`, `--tls-key-file=${d('not-pem.crt')}`], code: 3, message: /^fnr: --tls-cert-file .*big\.yaml cannot be read: it is 5 MiB, more than the limit of 4 MiB for a config file$/},
      // fnr wrapper-server
      {label: 'wrapper-server: no entrypoint', args: ['wrapper-server', '--port=0'], code: 3, message: /no function entrypoint/},
      {long: true, label: 'wrapper-server: empty entrypoint', args: ['wrapper-server', '--port=0', '--', ''], code: 3, message: /no function entrypoint/},
      {label: 'wrapper-server: port out of range', args: ['wrapper-server', '--port=70000', '--', '/bin/cat'], code: 2, message: /port/i},
      {long: true, label: 'wrapper-server: port without a value', args: ['wrapper-server', '--port', '--', '/bin/cat'], code: 2, message: /port|value/i},
      {label: 'wrapper-server: message size below the minimum', args: ['wrapper-server', '--max-request-body-size=1', '--', '/bin/cat'], code: 2, message: /max-request-body-size|1024/},
      {long: true, label: 'wrapper-server: verbosity out of range', args: ['wrapper-server', '--verbosity=9', '--', '/bin/cat'], code: 2, message: /verbosity/},
      {long: true, label: 'wrapper-server: grace period not a duration', args: ['wrapper-server', '--grace-period=x', '--', '/bin/cat'], code: 2, message: /duration/},
      {label: 'wrapper-server: unknown flag', args: ['wrapper-server', '--bogus', '--', '/bin/cat'], code: 2, message: /bogus/},
      {onlyLine: true, label: 'wrapper-server: port in use', args: ['wrapper-server', `--port=${busyPort}`, '--', '/bin/cat'], env: {FNR_BIND_ADDRESS: '127.0.0.1'}, code: 8, message: /the address is already in use/},
      // fnr eval: flags
      {label: 'eval: neither --image nor --exec', args: ['eval', '-'], code: 2, message: /must specify --image or --exec/},
      {label: 'eval: both --image and --exec', args: ['eval', '-', '--image', 'a', '--exec', 'b'], code: 2, message: /cannot also be provided/},
      {label: 'eval: empty --exec', args: ['eval', '-', '--exec', ''], code: 2, message: /--exec is empty/},
      {long: true, label: 'eval: blank --exec', args: ['eval', '-', '--exec', '   '], code: 2, message: /--exec is empty/},
      {label: 'eval: --exec with a pipe', args: ['eval', '-', '--exec', `${d('fn-cat')} | sh`], code: 2, message: /shell operators are not supported/},
      {long: true, label: 'eval: --exec with a redirect', args: ['eval', '-', '--exec', `${d('fn-cat')} > ${canary}`], code: 2, message: /shell operators are not supported/},
      {label: 'eval: --exec with ; and a command', args: ['eval', '-', '--exec', `${d('fn-cat')}; touch ${canary}`], code: 2, message: /shell operators are not supported/},
      {label: 'eval: --exec with $(…)', args: ['eval', '-', '--exec', `$(touch ${canary})`], code: 2, message: /shell operators are not supported/},
      {label: 'eval: --exec with backticks (no shell: a file name)', args: ['eval', '-', '--exec', `\`touch ${canary}\``], code: 1, message: /executable not found/},
      {label: 'eval: --exec of a missing file', args: ['eval', '-', '--exec', d('missing-fn')], code: 1, message: /executable not found/},
      {label: 'eval: --exec of a file that is not executable', args: ['eval', '-', '--exec', d('noexec')], code: 1, message: /permission denied/},
      {long: true, label: 'eval: --exec of a directory', args: ['eval', '-', '--exec', d('a-dir')], code: 1, message: /permission denied/},
      {label: 'eval: empty --image', args: ['eval', '-', '--image', ''], code: 2, message: /--image is empty/},
      {label: 'eval: --image not mapped', args: ['eval', '-', '--image', 'example.com/not-there:v1'], env: noContainers, code: 4, message: /is not in the exec config/},
      {long: true, label: 'eval: --image with spaces and metacharacters', args: ['eval', '-', '--image', 'a b; touch x'], env: noContainers, code: 4, message: /is not in the exec config/},
      {label: 'eval: --image with the config missing', args: ['eval', '-', '--image', 'x', `--config=${d('missing.yaml')}`], code: 3, message: /cannot read exec config/},
      {label: 'eval: --image with the functions directory missing', args: ['eval', '-', '--image', 'x', `--config=${fns.configPath}`, `--functions=${d('missing-dir')}`], code: 3, message: /functions directory .* does not exist/},
      {label: 'eval: --image with /dev/zero as the config (used to read forever)', args: ['eval', '-', '--image', 'x', '--config=/dev/zero'], code: 3, message: /not a regular file/},
      {label: 'eval: unknown flag', args: ['eval', '-', '--exec', d('fn-cat'), '--bogus'], code: 2, message: /bogus/},
      {label: 'eval: a DIR argument that does not exist', args: ['eval', '--exec', d('fn-cat'), 'stray'], code: 2, message: /stray: no such file or directory/},
      {label: 'eval: --input without a value', args: ['eval', '--exec', d('fn-cat'), '--input'], code: 2, message: /input|argument/i},
      {label: 'eval: timeout not a duration', args: ['eval', '-', '--exec', d('fn-cat'), '--timeout', 'soon'], code: 2, message: /duration/},
      // The deadline passes before the function starts or while it runs, as the machine is loaded: either message is right.
      {label: 'eval: 1 ms timeout', args: ['eval', '-', '--exec', d('fn-cat'), '--timeout', '1ms'], code: 6, message: /deadline exceeded before function|did not finish before the deadline and was killed/},
      {label: 'eval: output size below the minimum', args: ['eval', '-', '--exec', d('fn-cat'), '--max-output-size', '12'], code: 2, message: /max-output-size/},
      // fnr eval: inputs
      {label: 'eval: --input missing', args: ['eval', '--exec', d('fn-cat'), '--input', d('missing')], code: 2, message: /no such file or directory/},
      {label: 'eval: --input a dangling symlink', args: ['eval', '--exec', d('fn-cat'), '--input', d('dangling')], code: 2, message: /no such file or directory/},
      {long: true, label: 'eval: --input a symlink loop', args: ['eval', '--exec', d('fn-cat'), '--input', d('loop')], code: 2, message: /ELOOP/},
      {label: 'eval: --input through a file', args: ['eval', '--exec', d('fn-cat'), '--input', d('plain-file/x.yaml')], code: 2, message: /ENOTDIR/},
      {long: true, label: 'eval: --input name too long', args: ['eval', '--exec', d('fn-cat'), '--input', d(long)], code: 2, message: /ENAMETOOLONG/},
      {label: 'eval: --input /dev/zero (used to read forever)', args: ['eval', '--exec', d('fn-cat'), '--input', '/dev/zero'], code: 2, message: /not a regular file or directory/},
      {label: 'eval: --input unreadable (as nobody)', args: ['eval', '--exec', d('fn-cat'), '--input', d('unreadable.yaml')], asNobody: true, code: 5, message: /permission denied/},
      {label: 'eval: --input directory with an unreadable file (as nobody)', args: ['eval', '--exec', d('fn-cat'), '--input', d('pkg-unreadable')], asNobody: true, code: 5, message: /permission denied/},
      {label: 'eval: --input malformed YAML', args: ['eval', '--exec', d('fn-cat'), '--input', d('malformed.yaml')], code: 2, message: /MalformedYAMLError/},
      {label: 'eval: --input not KRM', args: ['eval', '--exec', d('fn-cat'), '--input', d('not-krm.yaml')], code: 2, message: /must contain only KRM resources/},
      {label: 'eval: stdin and a directory', args: ['eval', '--exec', d('fn-cat'), '--input', '-', '--input', d('pkg')], code: 2, message: /cannot be combined/},
      {label: 'eval: empty stdin', args: ['eval', '-', '--exec', d('fn-cat')], stdin: '', code: 2, message: /stdin is empty/},
      {label: 'eval: random bytes on stdin', args: ['eval', '-', '--exec', d('fn-cat')], stdin: Buffer.from([0x9f, 0x00, 0xff, 0x3a, 0x5b, 0x7b, 0x0a, 0x2d, 0x20, 0x26]), code: 2, message: /stdin/},
      {long: true, label: 'eval: invalid UTF-8 on stdin', args: ['eval', '-', '--exec', d('fn-cat')], stdin: Buffer.from([0xc3, 0x28, 0x0a]), code: 2, message: /stdin/},
      {label: 'eval: stdin nested 100,000 deep', args: ['eval', '-', '--exec', d('fn-cat')], stdin: `${'['.repeat(100_000)}${']'.repeat(100_000)}`, code: 2, message: /stdin/},
      {label: 'eval: duplicate keys on stdin', args: ['eval', '-', '--exec', d('fn-cat')], stdin: 'apiVersion: v1\nkind: ConfigMap\nkind: Secret\nmetadata:\n  name: a\n', code: 2, message: /Map keys must be unique/},
      {label: 'eval: a YAML bomb written to a .json file', args: ['eval', '-', '--exec', d('fn-cat'), '-o', d('out-bomb')], stdin: bombWithJsonPath(), code: 2, message: /YAML aliases expand to more than/},
      {label: 'eval: --fn-config missing', args: ['eval', '-', '--exec', d('fn-cat'), '--fn-config', d('missing.yaml')], code: 2, message: /missing function config file/},
      {long: true, label: 'eval: --fn-config a directory', args: ['eval', '-', '--exec', d('fn-cat'), '--fn-config', d('a-dir')], code: 2, message: /EISDIR/},
      {label: 'eval: --fn-config /dev/zero (used to read forever)', args: ['eval', '-', '--exec', d('fn-cat'), '--fn-config', '/dev/zero'], code: 2, message: /not a regular file/},
      {label: 'eval: --fn-config with two documents', args: ['eval', '-', '--exec', d('fn-cat'), '--fn-config', d('two-docs.yaml')], code: 2, message: /must not contain more than one config/},
      {label: 'eval: --fn-config not KRM', args: ['eval', '-', '--exec', d('fn-cat'), '--fn-config', d('not-krm.yaml')], code: 2, message: /functionConfig/},
      {label: 'eval: --fn-config unreadable (as nobody)', args: ['eval', '-', '--exec', d('fn-cat'), '--fn-config', d('unreadable.yaml')], asNobody: true, code: 5, message: /EACCES/},
      {label: 'eval: --fn-config and key=value arguments', args: ['eval', '-', '--exec', d('fn-cat'), '--fn-config', d('pkg/cm.yaml'), '--', 'a=b'], code: 2, message: /cannot be used together/},
      {label: 'eval: a function argument without =', args: ['eval', '-', '--exec', d('fn-cat'), '--', 'a=b', 'loose'], code: 2, message: /separated by =/},
      {long: true, label: 'eval: a function argument with an empty key', args: ['eval', '-', '--exec', d('fn-cat'), '--', '=v'], code: 2, message: /key before =/},
      // fnr eval: outputs
      {label: 'eval: --output an existing directory', args: ['eval', '-', '--exec', d('fn-cat'), '-o', d('pkg')], stdin: RL, code: 2, message: /already exists/},
      {label: 'eval: --output under a file', args: ['eval', '-', '--exec', d('fn-cat'), '-o', d('plain-file/out')], stdin: RL, code: 2, message: /not a directory/},
      {label: 'eval: --results-dir is a file', args: ['eval', '-', '--exec', d('fn-cat'), '--results-dir', d('plain-file')], stdin: RL, code: 2, message: /cannot write results to .*: not a directory/},
      // fnr image inspect (nothing here reaches a registry except the refused connection)
      {label: 'image inspect: no image', args: ['image', 'inspect'], code: 2, message: /image|argument/i},
      {label: 'image inspect: image with a space', args: ['image', 'inspect', 'a b'], code: 2, message: /a b/},
      {label: 'image inspect: upper-case repository', args: ['image', 'inspect', 'example.com/Foo/Bar:v1'], code: 2, message: /Foo\/Bar|repository/},
      {long: true, label: 'image inspect: traversal', args: ['image', 'inspect', '../../etc/passwd'], code: 2, message: /\.\./},
      {label: 'image inspect: digest of the wrong length', args: ['image', 'inspect', `example.com/fn@sha256:${'a'.repeat(63)}`], code: 2, message: /digest/},
      {long: true, label: 'image inspect: 300-character name', args: ['image', 'inspect', `example.com/${'n'.repeat(300)}:v1`], code: 2, message: /long|255|name/i},
      {long: true, label: 'image inspect: shell metacharacters', args: ['image', 'inspect', 'example.com/fn:v1;touch x'], code: 2, message: /fn:v1;touch x|tag|reference/},
      {label: 'image inspect: bad platform', args: ['image', 'inspect', '--platform', 'bogus', 'example.com/fn:v1'], code: 2, message: /platform/},
      {long: true, label: 'image inspect: timeout not a duration', args: ['image', 'inspect', '--timeout', 'soon', 'example.com/fn:v1'], code: 2, message: /duration/},
      {long: true, label: 'image inspect: unknown flag', args: ['image', 'inspect', '--bogus', 'example.com/fn:v1'], code: 2, message: /bogus/},
      {long: true, label: 'image inspect: two images', args: ['image', 'inspect', 'example.com/a:v1', 'example.com/b:v1'], code: 2, message: /example\.com\/b:v1|argument/},
      {label: 'image inspect: auth file missing', args: ['image', 'inspect', '--auth-file', d('missing.json'), 'example.com/fn:v1'], code: 3, message: /missing\.json/},
      {long: true, label: 'image inspect: auth file is a directory', args: ['image', 'inspect', '--auth-file', d('a-dir'), 'example.com/fn:v1'], code: 3, message: /a-dir/},
      {label: 'image inspect: auth file is malformed', args: ['image', 'inspect', '--auth-file', d('auth.json'), 'example.com/fn:v1'], code: 3, message: /auth\.json/},
      {long: true, label: 'image inspect: CA file missing', args: ['image', 'inspect', '--ca-file', d('missing.crt'), 'example.com/fn:v1'], code: 3, message: /missing\.crt/},
      {label: 'image inspect: CA file is not PEM', args: ['image', 'inspect', '--ca-file', d('not-pem.crt'), 'example.com/fn:v1'], code: 3, message: /not-pem\.crt/},
      {label: 'image inspect: auth file is a FIFO', args: ['image', 'inspect', '--auth-file', d('any.fifo'), 'example.com/fn:v1'], code: 3, message: /^fnr: registry auth file .*any\.fifo cannot be read: not a regular file \(it is a FIFO\)$/},
      {label: 'image inspect: auth file over 4 MiB', args: ['image', 'inspect', '--auth-file', d('big.yaml'), 'example.com/fn:v1'], code: 3, message: /^fnr: registry auth file .*big\.yaml cannot be read: it is 5 MiB/},
      {label: 'image inspect: CA file is /dev/zero', args: ['image', 'inspect', '--ca-file', '/dev/zero', 'example.com/fn:v1'], code: 3, message: /^fnr: CA file \/dev\/zero cannot be read: not a regular file \(it is a character device\)$/},
      {long: true, label: 'image inspect: CA file is a FIFO', args: ['image', 'inspect', '--ca-file', d('any.fifo'), 'example.com/fn:v1'], code: 3, message: /^fnr: CA file .*any\.fifo cannot be read: not a regular file \(it is a FIFO\)$/},
      // fnr test
      // (stdin empty: oclif reads a missing argument from a piped stdin)
      {label: 'test: no folder', args: ['test'], stdin: '', code: 2, message: /give the folder of test cases/},
      {label: 'test: folder missing', args: ['test', d('missing-dir'), '--exec', d('fn-cat')], code: 3, message: /missing-dir: not a directory of test cases/},
      {label: 'test: /dev/zero as the folder', args: ['test', '/dev/zero', '--exec', d('fn-cat')], code: 3, message: /\/dev\/zero: not a directory of test cases/},
      {long: true, label: 'test: a FIFO as the folder', args: ['test', d('any.fifo'), '--exec', d('fn-cat')], code: 3, message: /any\.fifo: not a directory of test cases/},
      {label: 'test: no cases in the folder', args: ['test', d('td-empty'), '--exec', d('fn-cat')], code: 3, message: /no test cases \(directories holding \.expected\/\) found/},
      {label: 'test: both --exec and --image', args: ['test', td, '--exec', d('fn-cat'), '--image', 'example.com/cat:v1'], code: 2, message: /cannot also be provided/},
      {label: 'test: --timeout not a duration', args: ['test', td, '--exec', d('fn-cat'), '--timeout', 'soon'], code: 2, message: /--timeout: expected a duration/},
      {label: 'test: --concurrency 0', args: ['test', td, '--exec', d('fn-cat'), '--concurrency', '0'], code: 2, message: /--concurrency/},
      {long: true, label: 'test: --filter without a value', args: ['test', td, '--exec', d('fn-cat'), '--filter'], code: 2, message: /--filter expects a value/},
      {label: 'test: --exec with a pipe', args: ['test', td, '--exec', `${d('fn-cat')} | sh`], code: 2, message: /shell operators are not supported/},
      {label: 'test: --exec of a missing file', args: ['test', td, '--exec', d('missing-fn')], code: 1, inReport: true, message: /missing-fn is not an executable file/},
      {label: 'test: --image not mapped', args: ['test', td, '--image', 'example.com/not-there:v1', ...config], code: 1, inReport: true, message: /is not in the exec config/},
      {label: 'test: a case whose config.yaml is malformed', args: ['test', tdBadYaml, '--exec', d('fn-cat')], code: 1, inReport: true, message: /config\.yaml/},
      {label: 'test: a case timeout that is not a duration', args: ['test', tdBadTimeout, '--exec', d('fn-cat')], code: 1, inReport: true, message: /timeout/},
      // fnr pods ls|gc|warm
      {label: 'pods ls: kubeconfig missing', args: ['pods', 'ls', `--kubeconfig=${d('missing.kubeconfig')}`], code: 3, message: /^fnr: kubeconfig .*missing\.kubeconfig cannot be read: no such file \(ENOENT\)$/},
      {label: 'pods ls: kubeconfig is a FIFO (used to hang)', args: ['pods', 'ls', `--kubeconfig=${d('any.fifo')}`], code: 3, message: /^fnr: kubeconfig .*any\.fifo cannot be read: not a regular file \(it is a FIFO\)$/},
      {long: true, label: 'pods ls: kubeconfig is /dev/zero (used to read without end)', args: ['pods', 'ls', '--kubeconfig=/dev/zero'], code: 3, message: /^fnr: kubeconfig \/dev\/zero cannot be read: not a regular file/},
      {label: 'serve: registry auth file is a FIFO (used to hang the start)', args: [...podServe, '--pod-cache-config=', '--enable-private-registries=true', `--registry-auth-secret-path=${d('any.fifo')}`], env: wrapperImage, code: 3, message: /^fnr: --registry-auth-secret-path: registry auth file .*any\.fifo cannot be read: not a regular file \(it is a FIFO\)$/},
      {label: 'test: a case whose config.yaml is a FIFO (used to hang)', args: ['test', tdFifo, '--exec', d('fn-cat')], code: 1, inReport: true, message: /\.expected\/config\.yaml cannot be read: not a regular file \(it is a FIFO\)/},
      {label: 'pods ls: kubeconfig malformed', args: ['pods', 'ls', `--kubeconfig=${d('broken.kubeconfig')}`], code: 3, message: /cannot load the Kubernetes configuration/},
      {long: true, label: 'pods ls: kubeconfig is a directory', args: ['pods', 'ls', `--kubeconfig=${d('a-dir')}`], code: 3, message: /kubeconfig .*a-dir cannot be read: it is a directory \(EISDIR\)/},
      {label: 'pods ls: no such context', args: ['pods', 'ls', dead, '--context=nope'], code: 3, message: /kubeconfig has no context "nope"/},
      {label: 'pods ls: namespace that is not a name', args: ['pods', 'ls', dead, '--namespace=Bad_NS'], code: 2, message: /--namespace "Bad_NS" is not a valid namespace name/},
      {label: 'pods ls: the API server is down', args: ['pods', 'ls', dead], code: 8, message: /cannot list pods in porch-fn-system: .*ECONNREFUSED/},
      {long: true, label: 'pods ls: unknown flag', args: ['pods', 'ls', dead, '-o', 'yaml'], code: 2, message: /Nonexistent flag: -o/},
      {label: 'pods gc: --include-live-replicas without --all', args: ['pods', 'gc', dead, '--include-live-replicas'], code: 2, message: /--include-live-replicas only goes with --all/},
      {label: 'pods gc: --older-than not a duration', args: ['pods', 'gc', dead, '--older-than=soon'], code: 2, message: /--older-than: expected a duration/},
      {long: true, label: 'pods gc: --stale-grace not a duration', args: ['pods', 'gc', dead, '--stale-grace=soon'], code: 2, message: /--stale-grace: expected a duration/},
      {label: 'pods gc: the API server is down', args: ['pods', 'gc', dead, '--all', '--dry-run'], code: 8, message: /cannot list pods in porch-fn-system: .*ECONNREFUSED/},
      {label: 'pods warm: nothing to warm', args: ['pods', 'warm', dead], env: wrapperImage, code: 2, message: /nothing to warm: pass --pod-cache-config FILE and\/or --image IMAGE/},
      {label: 'pods warm: pod cache config missing', args: ['pods', 'warm', dead, `--pod-cache-config=${d('missing-pcc.yaml')}`], env: wrapperImage, code: 3, message: /pod cache config .*missing-pcc\.yaml does not exist/},
      {label: 'pods warm: empty --pod-cache-config and no --image (no file, as for serve)', args: ['pods', 'warm', dead, '--pod-cache-config='], env: wrapperImage, code: 2, message: /nothing to warm: pass --pod-cache-config FILE and\/or --image IMAGE/},
      {label: 'pods warm: empty --image', args: ['pods', 'warm', dead, '--image='], env: wrapperImage, code: 2, message: /--image must not be empty/},
      {long: true, label: 'pods warm: --timeout not a duration', args: ['pods', 'warm', dead, '--image=x', '--timeout=soon'], env: wrapperImage, code: 2, message: /--timeout: expected a duration/},
      {label: 'pods warm: no wrapper server image', args: ['pods', 'warm', dead, '--image=example.com/fn:v1'], env: {WRAPPER_SERVER_IMAGE: ''}, code: 3, message: /the runner's pod template is unknown/},
      {label: 'pods warm: pod cache config is a FIFO', args: ['pods', 'warm', dead, `--pod-cache-config=${d('any.fifo')}`], env: wrapperImage, code: 3, message: PCC('not a regular file \\(it is a FIFO\\)$')},
      {long: true, label: 'pods warm: pod cache config is /dev/zero', args: ['pods', 'warm', dead, '--pod-cache-config=/dev/zero'], env: wrapperImage, code: 3, message: PCC('not a regular file')},
      {label: 'pods warm: pod cache config is malformed YAML', args: ['pods', 'warm', dead, `--pod-cache-config=${d('pcc-broken.yaml')}`], env: wrapperImage, code: 3, message: /is not valid YAML/},
      {long: true, label: 'pods warm: the API server is down', args: ['pods', 'warm', dead, '--image=example.com/fn:v1'], env: wrapperImage, code: 8, message: /cannot list pods in porch-fn-system: .*ECONNREFUSED/},
      {label: 'image inspect: registry refuses the connection', args: ['image', 'inspect', '--insecure-registry', '127.0.0.1:1', '--timeout', '10s', '127.0.0.1:1/fn/x:v1'], code: 8, message: /127\.0\.0\.1:1/},
    )
    // The short run (npm test) leaves out variations of cases it has; the long run has them all.
    if (!LONG) cases.splice(0, cases.length, ...cases.filter((c) => !c.long))
    results = await runAll(cases)
  })

  after(async () => {
    occupied?.close()
    await temp.cleanup()
  })

  // The runs happen a few at a time in before(); each case is a counted sub-case named by its label.
  it('every case exits with its code and one clear "fnr: " line', () => {
    expect(results.size).to.equal(cases.length)
    expect(new Set(cases.map((c) => c.label)).size, 'labels are unique').to.equal(cases.length)
    const failures: string[] = []
    for (const c of cases) {
      tally.tried('cli', {args: c.args, stdin: c.stdin ?? DEFAULT_STDIN, env: c.env, asNobody: c.asNobody})
      try {
        checkCliRun(c, results.get(c.label)!)
      } catch (err) {
        failures.push(`- ${c.label}: ${(err as Error).message.split('\n').slice(0, 8).join('\n    ')}`)
      }
    }
    expect(failures, `${failures.length} of ${cases.length} cases failed:\n${failures.join('\n')}`).to.deep.equal([])
  })

  it('ran nothing through a shell (the canary file was never created)', () => {
    expect(existsSync(canary)).to.equal(false)
  })
})
