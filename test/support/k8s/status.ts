/**
 * Kubernetes `Status` objects (what the fault proxy answers for an injected failure) and the tests' loose object type.
 * Shapes follow k8s.io/apimachinery/pkg/api/errors.
 */

/** A JSON object as it travels over the wire. Deliberately loose: test code. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type KubeObject = Record<string, any>;

export interface StatusCause {
  reason?: string;
  message?: string;
  field?: string;
}

export interface StatusDetails {
  name?: string;
  group?: string;
  kind?: string;
  uid?: string;
  causes?: StatusCause[];
  retryAfterSeconds?: number;
}

export interface StatusObject {
  kind: 'Status';
  apiVersion: 'v1';
  metadata: Record<string, never>;
  status: 'Failure' | 'Success';
  message?: string;
  reason?: string;
  details?: StatusDetails;
  code?: number;
}

/** The reason that kube-apiserver uses for a bare HTTP status code (errors.NewGenericServerResponse). */
export function reasonForCode(code: number): string {
  switch (code) {
    case 400:
      return 'BadRequest';
    case 401:
      return 'Unauthorized';
    case 403:
      return 'Forbidden';
    case 404:
      return 'NotFound';
    case 405:
      return 'MethodNotAllowed';
    case 406:
      return 'NotAcceptable';
    case 409:
      return 'Conflict';
    case 410:
      return 'Expired';
    case 413:
      return 'RequestEntityTooLarge';
    case 415:
      return 'UnsupportedMediaType';
    case 422:
      return 'Invalid';
    case 429:
      return 'TooManyRequests';
    case 500:
      return 'InternalError';
    case 503:
      return 'ServiceUnavailable';
    case 504:
      return 'Timeout';
    default:
      return 'Unknown';
  }
}

/** An injected failure, answered as a Status response (../cluster/fault-proxy.ts). */
export class ApiError extends Error {
  readonly code: number;
  readonly reason: string;
  readonly details: StatusDetails | undefined;
  readonly headers: Record<string, string>;

  constructor(code: number, reason: string, message: string, details?: StatusDetails, headers: Record<string, string> = {}) {
    super(message);
    this.name = 'ApiError';
    this.code = code;
    this.reason = reason;
    this.details = details;
    this.headers = headers;
  }

  toStatus(): StatusObject {
    return failureStatus(this.code, this.reason, this.message, this.details);
  }
}

export function failureStatus(code: number, reason: string, message: string, details?: StatusDetails): StatusObject {
  const status: StatusObject = { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason };
  if (details && Object.keys(details).length > 0) status.details = details;
  status.code = code;
  return status;
}

/** A generic error for a status code (used by fault injection). */
export function errorForCode(code: number, message?: string, retryAfterSeconds?: number): ApiError {
  const reason = reasonForCode(code);
  const headers: Record<string, string> = {};
  const details: StatusDetails = {};
  if (retryAfterSeconds !== undefined) {
    headers['Retry-After'] = String(retryAfterSeconds);
    details.retryAfterSeconds = retryAfterSeconds;
  }
  return new ApiError(code, reason, message ?? `injected failure (${code} ${reason})`, details, headers);
}
