/**
 * Resolving function pods' Service names through a chosen DNS server instead of the system resolver
 * (FNR_DNS_SERVER / the pod runtime's dnsServer option; docs/node.md). A gRPC resolver for the scheme
 * `fnr-dns`: the target `fnr-dns://<server>/<name>:<port>` is resolved with a node:dns Resolver whose only
 * server is <server> (A records), and re-resolved whenever the channel asks (reconnects), like grpc-js's own
 * `dns` resolver. Without the option nothing changes: names go to grpc-js's default resolver.
 */
import {promises as dns} from 'node:dns'
import {isIPv4, isIPv6} from 'node:net'

import * as grpc from '@grpc/grpc-js'

export const DNS_SERVER_SCHEME = 'fnr-dns'

/** A DNS server given as `ip`, `ip:port` or `[ipv6]:port`, checked; the normalised `host:port` (default port 53). */
export function parseDnsServer(value: string): string {
  const v = value.trim()
  const bracketed = /^\[([0-9a-fA-F:.]+)\](?::(\d+))?$/.exec(v)
  const m = bracketed ?? /^([0-9.]+)(?::(\d+))?$/.exec(v)
  const port = m?.[2] === undefined ? 53 : Number(m[2])
  // an address, not just its characters: 999.1.1.1 or [abc] would pass the start and fail the first pod call
  const address = m !== null && (bracketed ? isIPv6(m[1]!) : isIPv4(m[1]!))
  if (!m || !address || !Number.isInteger(port) || port < 1 || port > 65535) {
    throw new Error(`DNS server must be an IP address with an optional port (1.2.3.4, 1.2.3.4:5353, [::1]:5353), got ${JSON.stringify(value)}`)
  }
  return m[1]!.includes(':') ? `[${m[1]}]:${port}` : `${m[1]}:${port}`
}

/** The gRPC target that resolves `hostPort`'s host through `server`. */
export function dnsServerTarget(server: string, hostPort: string): string {
  registerDnsServerResolver()
  return `${DNS_SERVER_SCHEME}://${parseDnsServer(server)}/${hostPort}`
}

class DnsServerResolver implements grpc.experimental.Resolver {
  private resolver: dns.Resolver
  private readonly server: string
  private readonly host: string
  private readonly port: number
  private pending = false
  private again = false
  private destroyed = false
  private retryTimer: NodeJS.Timeout | undefined
  private retryMs = 0

  constructor(
    target: grpc.experimental.GrpcUri,
    private readonly listener: grpc.experimental.ResolverListener,
  ) {
    this.server = target.authority ?? '127.0.0.1'
    this.resolver = this.freshResolver()
    const hp = grpc.experimental.splitHostPort(target.path)
    this.host = hp?.host ?? target.path
    this.port = hp?.port ?? 443
  }

  /**
   * A request while a lookup runs is remembered and run after it (it used to be dropped). A failed lookup (no
   * ready endpoints yet: an empty answer) is retried by the resolver itself, 100 ms doubling to 2 s, until one
   * succeeds: grpc-js does not always ask again after a resolver error, and a function pod's Service name often
   * has no ready endpoint for a moment after the pod is Ready (the EndpointSlice controller lags; found on the
   * real control plane, test/cluster/function-pods.test.ts), which left the channel waiting out its deadline.
   */
  updateResolution(): void {
    if (this.destroyed) return
    if (this.pending) {
      this.again = true
      return
    }
    if (this.retryTimer) {
      clearTimeout(this.retryTimer)
      this.retryTimer = undefined
    }
    this.pending = true
    this.again = false
    this.resolver.resolve4(this.host).then(
      (ips) => {
        // no record is no address yet, however it comes (Node rejects ENODATA; an empty list means the same)
        if (ips.length === 0) throw new Error(`no A record for ${this.host} (ENODATA)`)
        return ips
      },
    ).then(
      (ips) => {
        this.pending = false
        if (this.destroyed) return
        this.retryMs = 0
        const endpoints = ips.map((ip) => ({addresses: [{host: ip, port: this.port}]}))
        this.listener(grpc.experimental.statusOrFromValue(endpoints), {}, null, '')
        if (this.again) this.updateResolution()
      },
      (err: Error) => {
        this.pending = false
        if (this.destroyed) return
        this.listener(grpc.experimental.statusOrFromError({code: grpc.status.UNAVAILABLE, details: `DNS resolution of ${this.host} failed: ${err.message}`}), {}, null, '')
        this.retryMs = Math.min(2000, this.retryMs === 0 ? 100 : this.retryMs * 2)
        this.resolver = this.freshResolver()
        this.retryTimer = setTimeout(() => {
          this.retryTimer = undefined
          this.updateResolution()
        }, this.again ? 0 : this.retryMs)
        this.retryTimer.unref()
      },
    )
  }

  /**
   * A resolver of its own for each lookup after a failure: Node 22's c-ares keeps an answer without
   * records in its cache, so asking the same resolver again never reached the server (one query,
   * then the call waited out its deadline; Node 26 asks again).
   */
  private freshResolver(): dns.Resolver {
    const r = new dns.Resolver({timeout: 2000, tries: 2})
    r.setServers([this.server])
    return r
  }

  destroy(): void {
    this.destroyed = true
    if (this.retryTimer) clearTimeout(this.retryTimer)
    this.resolver.cancel()
  }

  static getDefaultAuthority(target: grpc.experimental.GrpcUri): string {
    return target.path
  }
}

let registered = false

export function registerDnsServerResolver(): void {
  if (registered) return
  registered = true
  grpc.experimental.registerResolver(DNS_SERVER_SCHEME, DnsServerResolver)
}
