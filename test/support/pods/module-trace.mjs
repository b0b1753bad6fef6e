// Loaded with `node --import <this file>`: records every module URL the process resolves into
// $FNR_MODULE_TRACE (one per line), so a test can tell whether a module was ever loaded.
import {register} from 'node:module'

register(new URL('./module-trace-hooks.mjs', import.meta.url), {data: {file: process.env.FNR_MODULE_TRACE}})
