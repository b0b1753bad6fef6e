/**
 * Result fields set to YAML null stay null (absent, as kpt's Go structs decode them), never the
 * text "null" (except in the legacy resourceRef.metadata form, where kpt itself reads "null"): console and results.yaml compared with the real kpt (`kpt fn eval - --exec`),
 * for a function that passes and one that fails. Also the blank line kpt prints before
 * "For complete results".
 */
import {expect} from 'chai'
import {execa} from 'execa'
import {mkdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {runCli} from '../support/cli.js'
import {TempDirs, writeExecutable} from '../support/tmp.js'

const KPT = '/usr/bin/kpt'

const RESULTS = `results:
- message: field null
  severity: warning
  field: null
- message: file index null
  severity: info
  file: {path: x, index: null}
- message: values null
  field: {path: null, currentValue: null, proposedValue: ~}
  resourceRef: {apiVersion: v1, kind: ConfigMap, name: null, namespace: null}
  tags: {a: null, b: "null", c: x}
- message: null
  severity: null
- message: quoted
  field: {path: "null", currentValue: "null"}
  file: {path: "null", index: 0}
- message: legacy
  resourceRef: {apiVersion: v1, kind: ConfigMap, metadata: {name: null, namespace: Null}}
  severity: error
`

function fnScript(exitCode: number): string {
  return `#!/bin/sh
cat >/dev/null
cat <<'EOF'
apiVersion: config.kubernetes.io/v1
kind: ResourceList
items:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: a
${RESULTS}EOF
exit ${exitCode}
`
}

describe('results: YAML null fields', function () {
  this.timeout(60_000)
  const temp = new TempDirs()
  let dir: string
  let source: string
  before(async () => {
    dir = await temp.make('fnr-results-null-')
    await mkdir(path.join(dir, 'pkg'))
    await writeFile(path.join(dir, 'pkg', 'cm.yaml'), 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n')
    source = (await execa(KPT, ['fn', 'source', path.join(dir, 'pkg')])).stdout
  })
  after(() => temp.cleanup())

  const console = (stderr: string, resultsDir: string): string =>
    stderr.replace(/ in \d[^\n]*\n/g, ' in 0s\n').replaceAll(resultsDir, 'RESULTS').replace(/^fnr: .*\n?/m, '').trimEnd()

  for (const exitCode of [0, 1]) {
    it(`console and results.yaml as kpt's, for a function that exits ${exitCode}`, async () => {
      const fn = path.join(dir, `fn${exitCode}.sh`)
      await writeExecutable(fn, fnScript(exitCode))
      const kres = path.join(dir, `kres${exitCode}`)
      const fres = path.join(dir, `fres${exitCode}`)
      const k = await execa(KPT, ['fn', 'eval', '-', '--exec', fn, '--results-dir', kres, '--truncate-output=false'], {input: source, reject: false})
      const f = await runCli(['eval', '-', '--exec', fn, '--results-dir', fres, '--truncate-output=false'], {input: source})
      expect(f.exitCode, f.stderr).to.equal(exitCode)
      expect(k.exitCode).to.equal(exitCode)
      const kYaml = await readFile(path.join(kres, 'results.yaml'), 'utf8')
      expect(await readFile(path.join(fres, 'results.yaml'), 'utf8')).to.equal(kYaml)
      expect(kYaml).to.contain('b: "null"').and.to.contain('a: ""').and.to.contain('currentValue: "null"')
      expect(kYaml).not.to.match(/: null$/m)
      expect(kYaml).to.contain('      - {}\n').and.to.contain('        file:\n          path: x\n')
      expect(console(f.stderr, fres)).to.equal(console(k.stderr, kres))
      expect(f.stderr).to.contain('    [info]: \n').and.to.contain('\n\nFor complete results')
      if (exitCode === 0) expect(f.stdout.trimEnd()).to.equal(k.stdout.trimEnd())
    })
  }
})
