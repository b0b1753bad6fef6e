/**
 * The waiting room of the call budget (budget.ts, docs/limits.md): calls queue per connection,
 * connections per client (the peer's address without its port), and turns go round-robin, first
 * between clients, then between a client's connections, one call per turn. A client that sends a
 * burst of hundreds of calls thus delays another client's call by at most one call per turn, not by
 * the whole burst; a client gains nothing by opening more connections (they share its turns). Which
 * of a connection's calls goes on its turn is the owner's choice (`choose`; the oldest by default):
 * Porch sends all of its calls over one connection, and the budget gives the turn to a function
 * that has fewer calls running (budget.ts chooseOnTurn).
 *
 * Pure: no timers, no I/O. Clients and connections join the back of their ring when their first call
 * arrives and leave it when their last call has gone.
 */

/** Where a call came from: its client (address) and connection (address and port). */
export interface QueueKey {
  client: string
  connection: string
}

export class FairQueue<T> {
  /**
   * @param choose Which of a connection's waiting calls goes when its turn comes (an index into
   *   them, in arrival order); default the first.
   */
  constructor(private readonly choose?: (waiting: readonly T[]) => number) {}

  /** client → connection → calls, each Map in turn order (the next turn is the first entry). */
  private readonly clients = new Map<string, Map<string, T[]>>()
  private count = 0
  /** Where each queued item is, so that remove() finds it without searching every queue. */
  private readonly where = new Map<T, QueueKey>()

  get size(): number {
    return this.count
  }

  /** Clients with calls waiting. */
  get clientCount(): number {
    return this.clients.size
  }

  /** Calls waiting of the client that has the most. */
  largestClient(): number {
    let max = 0
    for (const connections of this.clients.values()) {
      let n = 0
      for (const q of connections.values()) n += q.length
      if (n > max) max = n
    }
    return max
  }

  push(item: T, key: QueueKey): void {
    let connections = this.clients.get(key.client)
    if (!connections) this.clients.set(key.client, (connections = new Map()))
    let q = connections.get(key.connection)
    if (!q) connections.set(key.connection, (q = []))
    q.push(item)
    this.where.set(item, key)
    this.count++
  }

  /** Which of a connection's calls goes on its turn. */
  private next(q: readonly T[]): number {
    return this.choose && q.length > 1 ? this.choose(q) : 0
  }

  /** The call whose turn it is, left in the queue. */
  peek(): T | undefined {
    const q = this.clients.values().next().value?.values().next().value
    return q?.[this.next(q)]
  }

  /** The call, in turn order, of the first client `admits` lets in; left in the queue. */
  firstOf(admits: (client: string) => boolean): T | undefined {
    for (const [client, connections] of this.clients)
      if (admits(client)) {
        const q = connections.values().next().value!
        return q[this.next(q)]
      }
    return undefined
  }

  /** Takes the call whose turn it is; its connection and client go to the back of their rings. */
  shift(): T | undefined {
    const first = this.clients.entries().next().value
    if (!first) return undefined
    const [client, connections] = first
    const [connection, q] = connections.entries().next().value!
    const item = q.splice(this.next(q), 1)[0]!
    this.where.delete(item)
    this.count--
    connections.delete(connection)
    if (q.length > 0) connections.set(connection, q)
    this.clients.delete(client)
    if (connections.size > 0) this.clients.set(client, connections)
    return item
  }

  /** Removes a queued call (cancelled, past its deadline); false when it is not queued. Turn order is kept. */
  remove(item: T): boolean {
    const key = this.where.get(item)
    if (!key) return false
    this.where.delete(item)
    const connections = this.clients.get(key.client)!
    const q = connections.get(key.connection)!
    q.splice(q.indexOf(item), 1)
    this.count--
    if (q.length === 0) connections.delete(key.connection)
    if (connections.size === 0) this.clients.delete(key.client)
    return true
  }
}

/**
 * The queue key of a gRPC peer string: the client is the address without the port, the connection
 * the whole string. grpc-js's server calls say `${remoteAddress}:${remotePort}` ("127.0.0.1:5432",
 * "::1:5432", unbracketed); bracketed and "ipv4:" forms are read too. An IPv4 client reaching a
 * dual-stack listener as ::ffff:a.b.c.d is the same client as a.b.c.d.
 */
export function peerKey(peer: string | undefined): QueueKey {
  const p = (peer ?? '').replace(/^(ipv4|ipv6):/, '')
  if (p === '' || p === 'unknown') return {client: 'unknown', connection: 'unknown'}
  const bracket = /^\[([^\]]*)\](?::\d+)?$/.exec(p)
  let host = bracket ? bracket[1]! : /:\d+$/.test(p) ? p.slice(0, p.lastIndexOf(':')) : p
  host = host.replace(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/i, '$1')
  return {client: host, connection: p}
}
