/**
 * The text of `fnr image inspect` (src/lib/registry/inspect.ts formatImageInspection): one aligned
 * "Key: value" row per fact, the index row only for a multi-platform image, sizes in binary units
 * with the exact bytes, "(none)" for an empty Entrypoint or Cmd, and the commands shell-quoted.
 * The command against a registry is in ./inspect-command.test.ts.
 */
import {expect} from 'chai'

import {formatImageInspection, type ImageInspection} from '../../src/lib/registry/inspect.js'

const DIGEST = `sha256:${'1'.repeat(64)}`
const INDEX = `sha256:${'2'.repeat(64)}`

function inspection(o: Partial<ImageInspection> = {}): ImageInspection {
  return {
    image: 'fn:v1',
    reference: 'docker.io/library/fn:v1',
    registry: 'docker.io',
    repository: 'library/fn',
    tag: 'v1',
    digest: DIGEST,
    mediaType: 'application/vnd.oci.image.manifest.v1+json',
    pinnedReference: `docker.io/library/fn@${DIGEST}`,
    platform: {os: 'linux', architecture: 'arm64', variant: 'v8'},
    configDigest: `sha256:${'3'.repeat(64)}`,
    entrypoint: ['/usr/local/bin/function'],
    cmd: [],
    command: ['/usr/local/bin/function'],
    size: 3 * 1024 * 1024 + 512 * 1024,
    layers: 1,
    wrapper: {command: ['/wrapper-server-tools/wrapper-server'], args: ['--port', '9446', '--', '/usr/local/bin/function']},
    ...o,
  }
}

describe('fnr image inspect: the text', () => {
  it('one aligned row per fact, in order', () => {
    expect(formatImageInspection(inspection())).to.equal(
      [
        'Image:      fn:v1',
        'Reference:  docker.io/library/fn:v1',
        `Digest:     ${DIGEST}`,
        'Media type: application/vnd.oci.image.manifest.v1+json',
        `Pinned:     docker.io/library/fn@${DIGEST}`,
        'Platform:   linux/arm64/v8',
        'Entrypoint: ["/usr/local/bin/function"]',
        'Cmd:        (none)',
        'Size:       3.5 MiB (3670016 bytes) (config and 1 compressed layer)',
        'Command:    /usr/local/bin/function',
        'Wrapper:    /wrapper-server-tools/wrapper-server --port 9446 -- /usr/local/bin/function',
        '',
      ].join('\n'),
    )
  })

  it('a multi-platform image has its index row; created when known; small sizes in bytes; arguments quoted for a shell', () => {
    const text = formatImageInspection(
      inspection({
        index: {digest: INDEX, mediaType: 'application/vnd.oci.image.index.v1+json', platforms: ['linux/amd64', 'linux/arm64/v8']},
        created: '2026-01-02T03:04:05Z',
        entrypoint: [],
        cmd: ['sh', '-c', "echo 'hi there'"],
        command: ['sh', '-c', "echo 'hi there'"],
        size: 900,
        layers: 3,
        platform: {os: 'linux', architecture: 'amd64'},
      }),
    )
    expect(text).to.contain(`Index:      ${INDEX} (application/vnd.oci.image.index.v1+json; linux/amd64, linux/arm64/v8)\n`)
    expect(text).to.contain('Entrypoint: (none)\n')
    expect(text).to.contain('Cmd:        ["sh","-c","echo \'hi there\'"]\n')
    expect(text).to.contain('Size:       900 B (config and 3 compressed layers)\n')
    expect(text).to.contain('Created:    2026-01-02T03:04:05Z\n')
    expect(text).to.contain("Command:    sh -c 'echo '\\''hi there'\\'''\n")
    expect(text).to.contain('Platform:   linux/amd64\n')
  })
})
