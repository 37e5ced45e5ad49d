export {
  MsgMeshError,
  InvalidRequestError,
  UnauthorizedError,
  ForbiddenError,
  NotFoundError,
  ConflictError,
  PayloadTooLargeError,
  RateLimitError,
  ServerError,
  type MsgMeshErrorOptions,
} from "./errors.js";
export { Subscription } from "./subscription.js";
export { backoffDelay } from "./backoff.js";
export type * from "./types.js";
