// `npm run build`: the TypeScript build, the bundles and the oclif manifest (setup.mjs build()).
import {build} from './setup.mjs'

build()
