/**
 * Kubernetes `Status` objects and the error type the test API server throws internally.
 * Shapes follow k8s.io/apimachinery/pkg/api/errors (NewNotFound, NewAlreadyExists, NewConflict, NewInvalid, ...).
 */

/** A JSON object as it travels over the wire. Deliberately loose: this is a test fake. */
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

/** An error that the server turns into a Status response. */
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

/** `pods`, or `leases.coordination.k8s.io` for grouped resources: how the apiserver names a resource in messages. */
export function qualifiedResource(resource: string, group: string): string {
  return group ? `${resource}.${group}` : resource;
}

function groupDetails(name: string, resource: string, group: string): StatusDetails {
  const details: StatusDetails = { name };
  if (group) details.group = group;
  details.kind = resource;
  return details;
}

export function notFound(resource: string, name: string, group = ''): ApiError {
  return new ApiError(404, 'NotFound', `${qualifiedResource(resource, group)} "${name}" not found`, groupDetails(name, resource, group));
}

export function alreadyExists(resource: string, name: string, group = ''): ApiError {
  return new ApiError(409, 'AlreadyExists', `${qualifiedResource(resource, group)} "${name}" already exists`, groupDetails(name, resource, group));
}

export function conflict(resource: string, name: string, why: string, group = ''): ApiError {
  return new ApiError(
    409,
    'Conflict',
    `Operation cannot be fulfilled on ${qualifiedResource(resource, group)} "${name}": ${why}`,
    groupDetails(name, resource, group),
  );
}

export const STALE_OBJECT_MESSAGE = 'the object has been modified; please apply your changes to the latest version and try again';

/** A field error as in k8s.io/apimachinery/pkg/util/validation/field. */
export interface FieldError {
  type: 'FieldValueInvalid' | 'FieldValueRequired' | 'FieldValueForbidden' | 'FieldValueNotSupported' | 'FieldValueDuplicate' | 'FieldValueTooLong';
  field: string;
  /** The detail text; for Invalid the bad value is rendered in front of it. */
  detail?: string;
  value?: unknown;
  /** Render `Invalid value: <detail>` without the value (field.OmitValueType, as kube-apiserver v1.37 does for CEL rules on objects). */
  omitValue?: boolean;
}

function renderValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (value === undefined || value === null) return 'null';
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return JSON.stringify(value);
}

export function fieldErrorMessage(error: FieldError): string {
  switch (error.type) {
    case 'FieldValueRequired':
      return `Required value${error.detail ? `: ${error.detail}` : ''}`;
    case 'FieldValueForbidden':
      return `Forbidden${error.detail ? `: ${error.detail}` : ''}`;
    case 'FieldValueDuplicate':
      return `Duplicate value: ${renderValue(error.value)}`;
    case 'FieldValueNotSupported':
      return `Unsupported value: ${renderValue(error.value)}${error.detail ? `: ${error.detail}` : ''}`;
    case 'FieldValueTooLong':
      return `Too long: ${error.detail ?? ''}`;
    default:
      if (error.omitValue) return `Invalid value: ${error.detail ?? ''}`;
      return `Invalid value: ${renderValue(error.value)}${error.detail ? `: ${error.detail}` : ''}`;
  }
}

/** 422 Invalid, as errors.NewInvalid renders it: `Pod "x" is invalid: [a: ..., b: ...]`. */
export function invalid(kind: string, name: string, errors: FieldError[], group = ''): ApiError {
  const rendered = errors.map((e) => `${e.field}: ${fieldErrorMessage(e)}`);
  const summary = rendered.length === 1 ? rendered[0] : `[${rendered.join(', ')}]`;
  const details: StatusDetails = { name };
  if (group) details.group = group;
  details.kind = kind;
  details.causes = errors.map((e) => ({ reason: e.type, message: fieldErrorMessage(e), field: e.field }));
  return new ApiError(422, 'Invalid', `${kind}${group ? `.${group}` : ''} "${name}" is invalid: ${summary}`, details);
}

export function badRequest(message: string): ApiError {
  return new ApiError(400, 'BadRequest', message);
}

export function methodNotAllowed(message = 'the server does not allow this method on the requested resource'): ApiError {
  return new ApiError(405, 'MethodNotAllowed', message);
}

export function unsupportedMediaType(accepted: string[]): ApiError {
  return new ApiError(
    415,
    'UnsupportedMediaType',
    `the body of the request was in an unknown format - accepted media types include: ${accepted.join(', ')}`,
  );
}

export function expired(message: string): ApiError {
  return new ApiError(410, 'Expired', message);
}

export function forbidden(resource: string, name: string, why: string, group = ''): ApiError {
  return new ApiError(403, 'Forbidden', `${qualifiedResource(resource, group)} "${name}" is forbidden: ${why}`, groupDetails(name, resource, group));
}

export function unauthorized(): ApiError {
  return new ApiError(401, 'Unauthorized', 'Unauthorized');
}

export function internalError(message: string): ApiError {
  return new ApiError(500, 'InternalError', `Internal error occurred: ${message}`, { causes: [{ message }] });
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
