// Loaded by `npm run test:unit` (mocha --require, in the process that runs the specs): the unit
// set starts no process. Any attempt to start one (child_process, and so execa, which is built on
// it) fails with a message that says what to do (test/suites.mjs). In-process loopback servers are
// allowed.
import childProcess from 'node:child_process'
import {syncBuiltinESMExports} from 'node:module'

for (const name of ['spawn', 'spawnSync', 'exec', 'execSync', 'execFile', 'execFileSync', 'fork']) {
  childProcess[name] = () => {
    throw new Error(`a unit test tried to start a process (child_process.${name}): unit tests start none. Take the spec out of UNIT in test/suites.mjs (it is then an integration spec), or the process out of the test.`)
  }
}
syncBuiltinESMExports()
