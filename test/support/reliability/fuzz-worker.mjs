// Worker-thread entry of the ResourceList property tests: worker threads do not inherit the tsx
// loader of the test process, so it is registered here before the TypeScript module is loaded.
import {register} from 'tsx/esm/api'

register()
await import('./fuzz-properties.ts')
