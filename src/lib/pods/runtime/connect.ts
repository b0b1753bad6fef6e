/**
 * The connect step of a function pod: its address (the Service's DNS name, optionally through
 * FNR_DNS_SERVER, or the pod IP), the gRPC channel to its wrapper server, and, for a pod just
 * launched, the wait until that channel is connected, bounded by the pod-ready deadline.
 */
import {FnrError} from '../../errors.js'
import {EvaluatorClient} from '../../grpc/client.js'
import {dnsServerTarget} from '../../grpc/dns-server.js'
import {WRAPPER_SERVER_PORT} from '../../registry/image-config.js'
import type {PodAddressMode} from '../../config/serve-config.js'
import {raceDeadline} from '../cluster/launcher.js'
import type {PodSlot} from '../model/slot.js'

export type {PodAddressMode} from '../../config/serve-config.js'

export interface PodConnectOptions {
  /** How fnr dials pods: the Service's DNS name or the pod IP. */
  addressMode: PodAddressMode
  /** The pod namespace (Service names). */
  namespace: string
  clusterDomain: string
  /** Resolve Service names through this DNS server (`ip[:port]`) instead of the system resolver. */
  dnsServer?: string
  maxMessageSize: number
}

export class PodConnector {
  constructor(private readonly options: PodConnectOptions) {}

  get addressMode(): PodAddressMode {
    return this.options.addressMode
  }

  addressOf(podName: string, ip: string): string {
    if (this.options.addressMode === 'pod-ip') return ip.includes(':') ? `[${ip}]:${WRAPPER_SERVER_PORT}` : `${ip}:${WRAPPER_SERVER_PORT}`
    const name = `${podName}.${this.options.namespace}.svc.${this.options.clusterDomain}:${WRAPPER_SERVER_PORT}`
    return this.options.dnsServer ? dnsServerTarget(this.options.dnsServer, name) : name
  }

  /** A gRPC channel to a pod (no retries: a failed call is retried by the evaluator on another pod). */
  connect(address: string): EvaluatorClient {
    return new EvaluatorClient(address, {
      maxMessageSize: this.options.maxMessageSize,
      channelOptions: {'grpc.initial_reconnect_backoff_ms': 100, 'grpc.max_reconnect_backoff_ms': 2000, 'grpc.enable_retries': 0},
    })
  }

  /** Gives a slot its address and channel (the channel connects on its first call). */
  attach(slot: PodSlot, ip: string): void {
    slot.address = this.addressOf(slot.name, ip)
    slot.client = this.connect(slot.address)
  }

  /** Attaches a launched pod's slot and waits until its channel is connected, within the pod-ready deadline. */
  async connectLaunched(slot: PodSlot, ip: string, bound: {deadline: number; deadlineName: string; signal: AbortSignal}): Promise<void> {
    this.attach(slot, ip)
    const address = slot.address!
    await raceDeadline(
      // The channel's own wait ends a second later: at the same instant, grpc-js's "failed to connect before the
      // deadline" (Unavailable) and this deadline's message raced, and either could reach the caller.
      slot.client!.waitForReady(bound.deadline + 1000),
      bound,
      () => new FnrError('DeadlineExceeded', `function pod ${slot.name} for image "${slot.image}" was not ready within ${bound.deadlineName} (connecting to ${address})`),
      () => new FnrError('Unavailable', `function pod ${slot.name} for image "${slot.image}" was abandoned (${slot.goneReason ?? 'the runner is shutting down'})`),
    )
  }
}
