/** Where registry credentials are looked for by default (src/lib/registry/auth.ts); the credential helpers, run as processes, are in ./credential-helpers.test.ts. */
import {expect} from 'chai'

import {defaultAuthFile} from '../../src/lib/registry/auth.js'

describe('registry credentials: the default auth file', () => {
  it('looks in $REGISTRY_AUTH_FILE, then $DOCKER_CONFIG, then ~/.docker/config.json', () => {
    expect(defaultAuthFile({REGISTRY_AUTH_FILE: '/a.json', DOCKER_CONFIG: '/d', HOME: '/h'})).to.equal('/a.json')
    expect(defaultAuthFile({DOCKER_CONFIG: '/d', HOME: '/h'})).to.equal('/d/config.json')
    expect(defaultAuthFile({HOME: '/h'})).to.equal('/h/.docker/config.json')
  })
})
