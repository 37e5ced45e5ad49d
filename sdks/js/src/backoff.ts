/**
 * Exponential backoff with full jitter (the AWS architecture blog's "full jitter", as
 * centrifuge-js): attempt n waits a uniformly random time in [minDelay, min(maxDelay, minDelay·2^n)].
 */
export function backoffDelay(attempt: number, minDelayMs: number, maxDelayMs: number, random = Math.random): number {
  const ceiling = Math.min(maxDelayMs, minDelayMs * 2 ** Math.min(attempt, 30));
  return Math.round(minDelayMs + random() * Math.max(0, ceiling - minDelayMs));
}

/** A connection that stayed up this long resets the backoff to its first step. */
export const HEALTHY_AFTER_MS = 5000;
