/**
 * The subscribers of the pod runtime's events (events.ts): the log lines and the metrics that
 * PodCache, adoption and the GC pass used to write themselves.
 */
import type {Logger} from '../../telemetry/log.js'
import type {Metrics} from '../../telemetry/metrics.js'
import {NO_TELEMETRY, type Telemetry} from '../../telemetry/telemetry.js'
import type {PodEvent, PodEvents} from '../model/events.js'

/** The log line of an event, as the runtime has always written it (none for the quiet ones). */
export function logPodEvent(logger: Logger, e: PodEvent): void {
  switch (e.type) {
    case 'placed':
      if (e.why) logger.debug(e.why === 'scale-up' ? 'scaling up: every pod of the image is at the waitlist length' : 'no pod for the image; starting one', {image: e.image, pods: e.live, load: e.load})
      return
    case 'ready':
      logger.info('function pod ready', {image: e.image, pod: e.pod, address: e.address, ...e.timings})
      return
    case 'failed':
      logger.warn('function pod failed to start', {image: e.image, pod: e.pod, error: e.error})
      return
    case 'adopted':
      logger.info('adopted function pod', {pod: e.pod, image: e.image, owner: e.owner, ownerState: e.ownerState, why: e.why})
      return
    case 'retired':
      if (e.cause.kind === 'digest') logger.info('function image changed; retiring its pod', {image: e.image, pod: e.pod, from: e.cause.from, to: e.cause.to})
      else logger.debug('function pod retired: its template version is not the current one', {image: e.image, pod: e.pod})
      return
    case 'templates-changed':
      logger.info('function pod template changed; replacing pods as they go idle', {from: e.from, to: e.to, origin: e.origin})
      return
    case 'evicted':
      logger.info('function pod evicted', {image: e.image, pod: e.pod, reason: e.reason, load: e.load})
      return
    case 'collected':
      if (e.kind === 'service') logger.info('deleted orphan Service', {service: e.name})
      return
    case 'created':
      return
  }
}

/** The metrics of an event, in `metrics`: pod cache lookups, and GC deletions by reason code. */
export function countPodEvent(metrics: Metrics, e: PodEvent): void {
  if (e.type === 'placed') metrics.podCacheLookup(e.image, e.result)
  else if (e.type === 'ready' || e.type === 'failed') metrics.podStarted(e.image, e.type === 'ready')
  else if (e.type === 'collected') metrics.podGcDeletion(e.kind, e.code)
}

/** Subscribes the log and the metrics (the server's telemetry) to a runtime's events; returns the unsubscribe. */
export function observePodEvents(events: PodEvents, logger: Logger, telemetry: Telemetry = NO_TELEMETRY): () => void {
  const offLog = events.on((e) => logPodEvent(logger, e))
  const {metrics} = telemetry
  const offMetrics = events.on((e) => countPodEvent(metrics, e))
  return () => {
    offLog()
    offMetrics()
  }
}
