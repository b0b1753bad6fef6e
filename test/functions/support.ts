/** Helpers for the tests of fnr's own KRM functions (functions/*): run them as real processes. */
import {spawn} from 'node:child_process'
import {constants as fsConstants} from 'node:fs'
import {access, mkdtemp, rm} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'

import {parse, stringify} from 'yaml'

export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url))
export const FUNCTIONS_DIR = path.join(REPO_ROOT, 'functions')
export const EXAMPLES_DIR = path.join(REPO_ROOT, 'examples')
export const KPT = '/usr/bin/kpt'

// Parsed YAML is untyped; tests index into it freely.
export type Obj = Record<string, any>

export interface ProcessResult {
  code: number | null
  stdout: string
  stderr: string
}

/** Run a command with the given stdin; resolves when it exits (never rejects on a non-zero exit). */
export function runProcess(command: string, args: string[], input: string, options: {cwd?: string} = {}): Promise<ProcessResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {cwd: options.cwd ?? REPO_ROOT, stdio: ['pipe', 'pipe', 'pipe']})
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d))
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d))
    child.on('error', reject)
    child.on('close', (code) => resolve({code, stdout, stderr}))
    child.stdin.on('error', () => {}) // the function may exit before reading everything
    child.stdin.end(input)
  })
}

/** Run functions/<name> with `input` (a string, or an object serialised as YAML) on stdin. */
export function runFunction(name: string, input: string | Obj): Promise<ProcessResult> {
  const text = typeof input === 'string' ? input : stringify(input)
  return runProcess(path.join(FUNCTIONS_DIR, name), [], text)
}

export function resourceList(items: Obj[], functionConfig?: Obj): Obj {
  const rl: Obj = {apiVersion: 'config.kubernetes.io/v1', kind: 'ResourceList', items}
  if (functionConfig !== undefined) rl.functionConfig = functionConfig
  return rl
}

/** kpt's functionConfig for `-- k=v` arguments. */
export function configMap(data: Record<string, string>, name = 'function-input'): Obj {
  return {apiVersion: 'v1', kind: 'ConfigMap', metadata: {name}, data}
}

export interface Output {
  items: Obj[]
  results: Obj[]
  raw: Obj
}

export function parseOutput(stdout: string): Output {
  const raw = parse(stdout) as Obj
  return {items: (raw.items ?? []) as Obj[], results: (raw.results ?? []) as Obj[], raw}
}

/** Run a function that must succeed (exit 0) and return its parsed output. */
export async function runOk(name: string, input: string | Obj): Promise<Output & {stdout: string; stderr: string}> {
  const r = await runFunction(name, input)
  if (r.code !== 0) throw new Error(`${name} exited ${r.code}\nstderr: ${r.stderr}\nstdout: ${r.stdout}`)
  return {...parseOutput(r.stdout), stdout: r.stdout, stderr: r.stderr}
}

export function find(items: Obj[], kind: string, name: string): Obj {
  const hit = items.find((i) => i.kind === kind && i.metadata?.name === name)
  if (!hit) throw new Error(`no ${kind}/${name} in output: ${items.map((i) => `${i.kind}/${i.metadata?.name}`).join(', ')}`)
  return hit
}

export function deployment(name: string, extra: Obj = {}): Obj {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: {name, labels: {app: name}, ...extra},
    spec: {
      replicas: 1,
      selector: {matchLabels: {app: name}},
      template: {metadata: {labels: {app: name}}, spec: {containers: [{name, image: 'nginx'}]}},
    },
  }
}

export const KPTFILE: Obj = {
  apiVersion: 'kpt.dev/v1',
  kind: 'Kptfile',
  metadata: {name: 'pkg', annotations: {'config.kubernetes.io/local-config': 'true'}},
}

/** A fresh temporary directory; remove it with removeTempDir. */
export function makeTempDir(prefix: string): Promise<string> {
  return mkdtemp(path.join(os.tmpdir(), `fnr-${prefix}-`))
}

export async function removeTempDir(dir: string | undefined): Promise<void> {
  if (dir) await rm(dir, {recursive: true, force: true})
}

/** Fails with a clear message when kpt is not installed where the interop tests expect it. */
export async function requireKpt(): Promise<void> {
  try {
    await access(KPT, fsConstants.X_OK)
  } catch {
    throw new Error(`kpt is required for the interop tests but ${KPT} is missing or not executable (install kpt 1.0.0-beta.56 there)`)
  }
}
