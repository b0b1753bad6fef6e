/**
 * Resolving function pods' Service names through a chosen DNS server instead of the system resolver
 * (FNR_DNS_SERVER / the pod runtime's dnsServer option; docs/node.md). A gRPC resolver for the scheme
 * `fnr-dns`: the target `fnr-dns://<server>/<name>:<port>` is resolved with a node:dns Resolver whose only
 * server is <server> (A records), and re-resolved whenever the channel asks (reconnects), like grpc-js's own
 * `dns` resolver. Without the option nothing changes: names go to grpc-js's default resolver.
 */
import {promises as dns} from 'node:dns'

import * as grpc from '@grpc/grpc-js'

export const DNS_SERVER_SCHEME = 'fnr-dns'

/** A DNS server given as `ip`, `ip:port` or `[ipv6]:port`, checked; the normalised `host:port` (default port 53). */
export function parseDnsServer(value: string): string {
  const v = value.trim()
  const m = /^\[([0-9a-fA-F:.]+)\](?::(\d+))?$/.exec(v) ?? /^([0-9.]+)(?::(\d+))?$/.exec(v)
  const port = m?.[2] === undefined ? 53 : Number(m[2])
  if (!m || !Number.isInteger(port) || port < 1 || port > 65535) {
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
  private readonly resolver = new dns.Resolver({timeout: 2000, tries: 2})
  private readonly host: string
  private readonly port: number
  private pending = false
  private destroyed = false

  constructor(
    target: grpc.experimental.GrpcUri,
    private readonly listener: grpc.experimental.ResolverListener,
  ) {
    this.resolver.setServers([target.authority ?? '127.0.0.1'])
    const hp = grpc.experimental.splitHostPort(target.path)
    this.host = hp?.host ?? target.path
    this.port = hp?.port ?? 443
  }

  updateResolution(): void {
    if (this.pending || this.destroyed) return
    this.pending = true
    this.resolver
      .resolve4(this.host)
      .then(
        (ips) => {
          if (this.destroyed) return
          const endpoints = ips.map((ip) => ({addresses: [{host: ip, port: this.port}]}))
          this.listener(grpc.experimental.statusOrFromValue(endpoints), {}, null, '')
        },
        (err: Error) => {
          if (this.destroyed) return
          this.listener(grpc.experimental.statusOrFromError({code: grpc.status.UNAVAILABLE, details: `DNS resolution of ${this.host} failed: ${err.message}`}), {}, null, '')
        },
      )
      .finally(() => (this.pending = false))
  }

  destroy(): void {
    this.destroyed = true
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
