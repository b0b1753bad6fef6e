/**
 * Image reference normalisation for matching (not for pulling): how fnr decides that two
 * spellings name the same function image.
 *
 * Rule (documented in README "Image matching"):
 *   1. A name with no "/" gets the default image prefix (like kpt and porch-server do):
 *      "set-namespace:v0.4.1" → "ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.1".
 *   2. Docker Hub names are canonicalised: "docker.io/", "index.docker.io/" and
 *      "registry-1.docker.io/" prefixes are dropped, as is "library/" on Docker Hub names, and a
 *      first path component that is not a registry host (no ".", no ":", not "localhost") is
 *      taken as a Docker Hub name.
 *   3. No tag and no digest means ":latest".
 *   4. Registry host is lower-cased; everything else is compared as written (tags are case
 *      sensitive).
 */

export const DEFAULT_IMAGE_PREFIX = 'ghcr.io/kptdev/krm-functions-catalog/'

const DOCKER_HUB_HOSTS = new Set(['docker.io', 'index.docker.io', 'registry-1.docker.io'])

function isRegistryHost(component: string): boolean {
  return component.includes('.') || component.includes(':') || component === 'localhost'
}

export function withPrefix(prefix: string, name: string): string {
  if (prefix === '') return name
  return prefix.endsWith('/') ? `${prefix}${name}` : `${prefix}/${name}`
}

/**
 * How kpt names an image function on the console and in results.yaml: a name with no "/" gets the
 * default image prefix ("set-namespace:v0.4" -> "ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4"),
 * anything else is kept as written (no other normalisation).
 */
export function displayImage(image: string, defaultPrefix: string = DEFAULT_IMAGE_PREFIX): string {
  return image.includes('/') ? image : withPrefix(defaultPrefix, image)
}

export function normaliseImage(image: string, defaultPrefix: string = DEFAULT_IMAGE_PREFIX): string {
  let ref = image.trim()
  if (!ref.includes('/')) ref = withPrefix(defaultPrefix, ref)

  let digest = ''
  const at = ref.indexOf('@')
  if (at >= 0) {
    digest = ref.slice(at)
    ref = ref.slice(0, at)
  }
  let tag = ''
  const lastSlash = ref.lastIndexOf('/')
  const colon = ref.lastIndexOf(':')
  if (colon > lastSlash) {
    tag = ref.slice(colon)
    ref = ref.slice(0, colon)
  }

  const parts = ref.split('/')
  let host = parts[0]!
  let path = parts.slice(1)
  if (!isRegistryHost(host)) {
    path = parts
    host = 'docker.io'
  }
  host = host.toLowerCase()
  if (DOCKER_HUB_HOSTS.has(host)) {
    host = 'docker.io'
    if (path.length === 1) path = ['library', ...path]
  }
  if (!tag && !digest) tag = ':latest'
  return `${host}/${path.join('/')}${tag}${digest}`
}
