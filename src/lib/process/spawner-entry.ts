/** The spawner process's main module (spawner-process.ts), which spawner.ts forks. */
import {runSpawnerProcess} from './spawner-process.js'

runSpawnerProcess()
