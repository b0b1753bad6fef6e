/**
 * lib/registry: image references, the OCI registry client, credentials, CAs and the pull Secret.
 * Light to import (node built-ins only; @kubernetes/client-node is used for types only).
 */
import {access} from 'node:fs/promises'

import {readConfigFile} from '../read-file.js'
import type {Logger} from '../telemetry/log.js'
import {DockerConfig, defaultAuthFile} from './auth.js'
import {RegistryClient, type RegistryClientOptions} from './client.js'
import {loadCaFromDirectory} from './tls.js'

export * from './auth.js'
export * from './client.js'
export * from './image-config.js'
export * from './pull-secret.js'
export * from './reference.js'
export {loadCaFile, loadCaFromDirectory, trustedCertificates, validatePem} from './tls.js'

/** The registry flags of `fnr serve` (the names of Porch's function runner). */
export interface RunnerRegistrySettings {
  enablePrivateRegistries: boolean
  /** --registry-auth-secret-path: docker config JSON. */
  authSecretPath: string
  /** --enable-private-registries-tls (only honoured with enablePrivateRegistries, as in Porch). */
  enableTls: boolean
  /** --tls-secret-path: directory with ca.crt or ca.pem. */
  tlsSecretPath: string
}

export interface RunnerRegistry {
  client: RegistryClient
  /** The credentials in use (empty when private registries are off and no DOCKER_CONFIG is set). */
  dockerConfig: DockerConfig
  /** The raw docker config bytes for the pull Secret; undefined when private registries are off. */
  dockerConfigJson?: Buffer
}

/**
 * Builds the client `fnr serve` uses. With private registries on, credentials come from
 * --registry-auth-secret-path for every registry (not one prefix) and, with TLS on, the CA from
 * --tls-secret-path is added to the system roots. With them off, $REGISTRY_AUTH_FILE or
 * $DOCKER_CONFIG/config.json is used when present (like Porch's default keychain), else anonymous.
 * File problems are FnrError('Config').
 */
export async function createRunnerRegistry(
  settings: RunnerRegistrySettings,
  extra: Omit<RegistryClientOptions, 'dockerConfig' | 'caCertificates'> & {logger?: Logger} = {},
  env: NodeJS.ProcessEnv = process.env,
): Promise<RunnerRegistry> {
  let dockerConfig = DockerConfig.empty()
  let dockerConfigJson: Buffer | undefined
  const caCertificates: string[] = []
  if (settings.enablePrivateRegistries) {
    dockerConfigJson = await readConfigFile(settings.authSecretPath, {label: `--registry-auth-secret-path: registry auth file ${settings.authSecretPath} cannot be read`})
    dockerConfig = DockerConfig.parse(dockerConfigJson, settings.authSecretPath)
    if (settings.enableTls) caCertificates.push((await loadCaFromDirectory(settings.tlsSecretPath)).pem)
  } else {
    const file = defaultAuthFile(env)
    if (file !== undefined) {
      const exists = await access(file).then(
        () => true,
        () => false,
      )
      if (exists) dockerConfig = await DockerConfig.load(file)
    }
  }
  return {client: new RegistryClient({...extra, dockerConfig, caCertificates}), dockerConfig, dockerConfigJson}
}
export * from './inspect.js'
