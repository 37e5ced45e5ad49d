// Typed errors (spec section 6). instanceof is answered from a brand kept
// under a global symbol, so it holds across the ESM and CommonJS builds of
// this package (and across two installed copies) as well as within one.

const BRAND = Symbol.for("@msgmesh/sdk/error-kind");

type Kind =
  | "MsgMeshError"
  | "InvalidRequestError"
  | "UnauthorizedError"
  | "ForbiddenError"
  | "NotFoundError"
  | "ConflictError"
  | "PayloadTooLargeError"
  | "RateLimitError"
  | "ServerError";

export interface MsgMeshErrorOptions {
  /** HTTP status (0 when no answer arrived: network error, timeout). */
  status?: number;
  /** The server's stable error code (proto/openapi.yaml ErrorCode), or a client-side one. */
  code?: string;
  /** X-Request-Id of the answer (the `request_id` of a 5xx body when the header is missing). */
  requestId?: string;
  /** Seconds to wait before retrying (Retry-After), when the server said so. */
  retryAfter?: number;
  cause?: unknown;
}

/** Every error the SDK raises or reports. */
export class MsgMeshError extends Error {
  readonly status: number;
  readonly code: string;
  readonly requestId: string | undefined;
  readonly retryAfter: number | undefined;

  constructor(message: string, options: MsgMeshErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.status = options.status ?? 0;
    this.code = options.code ?? "unknown";
    this.requestId = options.requestId;
    this.retryAfter = options.retryAfter;
    const kind = (new.target as unknown as { kind: Kind }).kind ?? "MsgMeshError";
    this.name = kind;
    Object.defineProperty(this, BRAND, { value: kinds(kind), enumerable: false });
  }

  static readonly kind: Kind = "MsgMeshError";

  static [Symbol.hasInstance](value: unknown): boolean {
    if (typeof value !== "object" || value === null) return false;
    const brand = (value as Record<symbol, unknown>)[BRAND];
    if (!Array.isArray(brand)) return false;
    return brand.includes((this as unknown as { kind: Kind }).kind);
  }
}

function kinds(kind: Kind): Kind[] {
  return kind === "MsgMeshError" ? ["MsgMeshError"] : [kind, "MsgMeshError"];
}

/** 400 or 422: the request is wrong; retrying it unchanged is pointless. */
export class InvalidRequestError extends MsgMeshError {
  static override readonly kind: Kind = "InvalidRequestError";
}
/** 401: the credential is missing, unknown, expired or revoked. Terminal for subscriptions. */
export class UnauthorizedError extends MsgMeshError {
  static override readonly kind: Kind = "UnauthorizedError";
}
/** 403: not allowed (role, capability) or the tenant is suspended; subscriptions retry with backoff. */
export class ForbiddenError extends MsgMeshError {
  static override readonly kind: Kind = "ForbiddenError";
}
/** 404: unknown topic (or route, or webhook). */
export class NotFoundError extends MsgMeshError {
  static override readonly kind: Kind = "NotFoundError";
}
/** 409: it already exists. */
export class ConflictError extends MsgMeshError {
  static override readonly kind: Kind = "ConflictError";
}
/** 413: over a size or count limit. */
export class PayloadTooLargeError extends MsgMeshError {
  static override readonly kind: Kind = "PayloadTooLargeError";
}
/** 429: over a rate or quota; retryAfter says when to try again. */
export class RateLimitError extends MsgMeshError {
  static override readonly kind: Kind = "RateLimitError";
}
/** 5xx, or no answer at all (status 0: network error, timeout); requestId names the failed request. */
export class ServerError extends MsgMeshError {
  static override readonly kind: Kind = "ServerError";
}

/** The error class for an HTTP status. */
export function errorFor(status: number, message: string, options: MsgMeshErrorOptions): MsgMeshError {
  const o = { ...options, status };
  if (status === 400 || status === 422) return new InvalidRequestError(message, o);
  if (status === 401) return new UnauthorizedError(message, o);
  if (status === 403) return new ForbiddenError(message, o);
  if (status === 404) return new NotFoundError(message, o);
  if (status === 409) return new ConflictError(message, o);
  if (status === 413) return new PayloadTooLargeError(message, o);
  if (status === 429) return new RateLimitError(message, o);
  if (status >= 500 || status === 0) return new ServerError(message, o);
  return new MsgMeshError(message, o);
}

/** The HTTP status a WebSocket error frame's code stands for (proto/openapi.yaml ErrorCode). */
export function statusOfCode(code: string): number {
  switch (code) {
    case "invalid_request":
    case "invalid_cursor":
    case "room_not_supported":
      return 400;
    case "validation_failed":
      return 422;
    case "unauthenticated":
    case "invalid_credential":
    case "invalid_token":
    case "token_expired":
    case "credential_revoked":
      return 401;
    case "forbidden":
    case "tenant_suspended":
      return 403;
    case "topic_not_found":
    case "not_found":
      return 404;
    case "conflict":
    case "topic_exists":
      return 409;
    case "payload_too_large":
      return 413;
    case "rate_limited":
    case "quota_exceeded":
    case "too_many_subscribers":
      return 429;
    default:
      return 503;
  }
}

/** Parses Retry-After (seconds or an HTTP date) into seconds. */
export function parseRetryAfter(value: string | null | undefined): number | undefined {
  if (!value) return undefined;
  const n = Number(value);
  if (Number.isFinite(n) && n >= 0) return n;
  const t = Date.parse(value);
  if (Number.isNaN(t)) return undefined;
  return Math.max(0, Math.ceil((t - Date.now()) / 1000));
}

/** Builds the typed error of a non-2xx answer from its status, headers and body text. */
export function errorFromAnswer(
  status: number,
  headers: { get(name: string): string | null },
  bodyText: string,
  what: string,
): MsgMeshError {
  let message = "";
  let code: string | undefined;
  let bodyRequestId: string | undefined;
  try {
    const body = JSON.parse(bodyText) as { error?: unknown; code?: unknown; request_id?: unknown };
    if (typeof body.error === "string") message = body.error;
    if (typeof body.code === "string") code = body.code;
    if (typeof body.request_id === "string") bodyRequestId = body.request_id;
  } catch {
    message = bodyText.slice(0, 200);
  }
  const requestId = headers.get("x-request-id") ?? bodyRequestId ?? undefined;
  const retryAfter = parseRetryAfter(headers.get("retry-after"));
  return errorFor(status, `${what}: ${status}${code ? ` ${code}` : ""}${message ? `: ${message}` : ""}`, {
    code: code ?? `http_${status}`,
    requestId,
    retryAfter,
  });
}

/** Is err a 401 (terminal for subscriptions)? Accepts foreign errors that carry status 401. */
export function isUnauthorized(err: unknown): boolean {
  if (err instanceof UnauthorizedError) return true;
  return typeof err === "object" && err !== null && (err as { status?: unknown }).status === 401;
}
