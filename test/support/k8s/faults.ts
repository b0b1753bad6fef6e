/**
 * The rules of the fault-injecting proxy in front of kube-apiserver (../cluster/fault-proxy.ts): fail the next N
 * matching requests with a status code, or delay them. The proxy drops and expires watches itself.
 */
import type { ApiError } from './status.js';
import { errorForCode } from './status.js';

export type Verb = 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch' | 'delete' | 'deletecollection';

export interface RequestMatch {
  /** One verb or several; omitted matches every verb. */
  verb?: Verb | Verb[];
  /** `pods`, `pods/status`, `leases`, ...; `*` or omitted matches every resource (a subresource only matches `res/sub`). */
  resource?: string;
  namespace?: string;
  name?: string;
}

export interface FailureRule extends RequestMatch {
  /** HTTP status code of the injected Status (e.g. 500, 503, 409, 429). */
  code: number;
  /** How many matching requests fail; default 1. `Infinity` fails until cleared. */
  times?: number;
  message?: string;
  /** Adds a Retry-After header and details.retryAfterSeconds (client-go retries 429/5xx with it). */
  retryAfterSeconds?: number;
}

export interface LatencyRule extends RequestMatch {
  ms: number;
  /** How many matching requests are delayed; default Infinity. */
  times?: number;
}

export interface RequestInfo {
  verb: Verb;
  /** `pods` or `pods/status` */
  resource: string;
  namespace?: string;
  name?: string;
}

export interface FaultHandle {
  /** How many more requests this rule will affect. */
  readonly remaining: number;
  /** How many requests it has affected so far. */
  readonly hits: number;
  cancel(): void;
}

interface Entry<R> {
  rule: R;
  remaining: number;
  hits: number;
}

function matches(rule: RequestMatch, info: RequestInfo): boolean {
  if (rule.verb !== undefined) {
    const verbs = Array.isArray(rule.verb) ? rule.verb : [rule.verb];
    if (!verbs.includes(info.verb)) return false;
  }
  if (rule.resource !== undefined && rule.resource !== '*' && rule.resource !== info.resource) return false;
  if (rule.namespace !== undefined && rule.namespace !== info.namespace) return false;
  if (rule.name !== undefined && rule.name !== info.name) return false;
  return true;
}

export class FaultInjector {
  private failures: Entry<FailureRule>[] = [];
  private latencies: Entry<LatencyRule>[] = [];

  /** Fails the next `times` (default 1) requests that match with the given status code. */
  failNext(rule: FailureRule): FaultHandle {
    return this.add(this.failures, rule, rule.times ?? 1);
  }

  /** Delays matching requests by `ms` before they are served. */
  addLatency(rule: LatencyRule): FaultHandle {
    return this.add(this.latencies, rule, rule.times ?? Infinity);
  }

  clear(): void {
    this.failures = [];
    this.latencies = [];
  }

  private add<R>(list: Entry<R>[], rule: R, times: number): FaultHandle {
    const entry: Entry<R> = { rule, remaining: times, hits: 0 };
    list.push(entry);
    return {
      get remaining() {
        return entry.remaining;
      },
      get hits() {
        return entry.hits;
      },
      cancel: () => {
        entry.remaining = 0;
      },
    };
  }

  /** Consumes the matching rules for a request: total delay, and the error to answer with (if any). */
  take(info: RequestInfo): { delayMs: number; error?: ApiError } {
    let delayMs = 0;
    for (const entry of this.latencies) {
      if (entry.remaining > 0 && matches(entry.rule, info)) {
        entry.remaining--;
        entry.hits++;
        delayMs += entry.rule.ms;
      }
    }
    let error: ApiError | undefined;
    for (const entry of this.failures) {
      if (entry.remaining > 0 && matches(entry.rule, info)) {
        entry.remaining--;
        entry.hits++;
        error = errorForCode(entry.rule.code, entry.rule.message, entry.rule.retryAfterSeconds);
        break;
      }
    }
    this.failures = this.failures.filter((e) => e.remaining > 0);
    this.latencies = this.latencies.filter((e) => e.remaining > 0);
    return { delayMs, error };
  }
}
