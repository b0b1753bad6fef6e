/**
 * Main of the runner image's /home/nonroot/grpc-health-probe (docker/porch/grpc-health-probe runs
 * it): the probe itself is lib/grpc/health-probe.ts, and this file loads nothing else.
 */
import {runHealthProbe} from '../lib/grpc/health-probe.js'

runHealthProbe(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`grpc-health-probe: ${(err as Error).message}\n`)
    process.exit(2)
  },
)
