/**
 * `fnr eval --image` through a container CLI (src/lib/container/cli-runtime.ts): a stand-in docker
 * (and podman) on PATH records the command line fnr gives it and runs the "function" (cat). fnr
 * must pick the CLI kpt's KPT_FN_RUNTIME names when it answers, give it kpt's `run` line, drop its pull
 * progress from the function's stderr, and remove the container when it kills the CLI.
 */
import {expect} from 'chai'
import {readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {runCli} from '../support/cli.js'
import {TempDirs} from '../support/tmp.js'

const INPUT = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n'

/** A container CLI that answers its probe, logs each command line to $LOG, and runs `cat` (or sleeps for the image "sleepy"). */
function standIn(name: string): string {
  return `#!/bin/sh
echo "${name} $*" >> "$LOG"
case "$1" in
  version|info) echo 27.0.0; exit 0 ;;
  rm) exit 0 ;;
  run) ;;
  *) exit 125 ;;
esac
for last in "$@"; do :; done
echo "Unable to find image '$last' locally" >&2
echo "v1: Pulling from x/fn" >&2
echo "4e9f2cdf4387: Pull complete" >&2
echo "the function says hi" >&2
case "$last" in *sleepy*) exec sleep 30 ;; esac
exec cat
`
}

describe('image functions through a container CLI (docker, podman) with kpt\'s command line', function () {
  this.timeout(60_000)
  const temp = new TempDirs()
  let dir = ''
  let log = ''
  let env: Record<string, string> = {}
  after(() => temp.cleanup())

  before(async () => {
    dir = await temp.make('fnr-cli-runtime-')
    log = path.join(dir, 'log')
    for (const cli of ['docker', 'podman']) await writeFile(path.join(dir, cli), standIn(cli), {mode: 0o755})
    env = {PATH: `${dir}:${process.env.PATH}`, LOG: log, FNR_CONTAINER_RUNTIME: 'auto', FNR_EXIT_CODES: 'fnr', KPT_FN_RUNTIME: '', KRM_FN_RUNTIME: ''}
  })
  beforeEach(() => writeFile(log, ''))

  const lines = async (): Promise<string[]> => (await readFile(log, 'utf8')).split('\n').filter((l) => l !== '')

  it('runs the image with docker run --rm -i --network none --user nobody … as kpt does, output and exit code passed through', async () => {
    const r = await runCli(['eval', '-', '--image', 'example.com/fn:v1', '--env', 'B=2', '--env', 'A=1'], {input: INPUT, env})
    expect(r.exitCode, r.stderr).to.equal(0)
    expect(r.stdout).to.include('name: a')
    const calls = await lines()
    expect(calls[0]).to.equal('docker version --format {{.Server.Version}}')
    expect(calls[1]).to.match(/^docker run --rm -i --network none --user nobody --security-opt=no-new-privileges --pull missing -e A=1 -e B=2 --name fnr-\d+-[0-9a-f]+ example\.com\/fn:v1$/)
    expect(calls).to.have.length(2)
    // The CLI's pull progress is not the function's stderr.
    expect(r.stderr).to.include('the function says hi')
    expect(r.stderr).not.to.match(/Pulling from|Pull complete|Unable to find image/)
  })

  it('maps --network, --as-current-user, --image-pull-policy and --mount; KPT_FN_RUNTIME picks podman', async () => {
    const r = await runCli(
      ['eval', '-', '--image', 'set-labels:v0.2', '--network', '--as-current-user', '--image-pull-policy', 'never', '--mount', 'type=bind,src=/tmp,dst=/in'],
      {input: INPUT, env: {...env, KPT_FN_RUNTIME: 'podman'}},
    )
    expect(r.exitCode, r.stderr).to.equal(0)
    const calls = await lines()
    expect(calls[0]).to.equal('podman info --format {{.Host.OCIRuntime.Name}}')
    const uid = `${process.getuid!()}:${process.getgid!()}`
    expect(calls[1]).to.match(
      new RegExp(`^podman run --rm -i --network host --user ${uid} --security-opt=no-new-privileges --pull never --mount type=bind,src=/tmp,dst=/in --name fnr-\\d+-[0-9a-f]+ ghcr\\.io/kptdev/krm-functions-catalog/set-labels:v0\\.2$`),
    )
  })

  it('removes the container when --timeout kills the CLI', async () => {
    const r = await runCli(['eval', '-', '--image', 'example.com/sleepy:v1', '--timeout', '1s'], {input: INPUT, env})
    expect(r.exitCode, r.stderr).to.equal(6)
    const calls = await lines()
    const name = /--name (fnr-\d+-[0-9a-f]+)/.exec(calls[1] ?? '')?.[1]
    expect(name).to.be.a('string')
    expect(calls).to.include(`docker rm -f ${name}`)
  })
})
