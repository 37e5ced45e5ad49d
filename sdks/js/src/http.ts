import { InvalidRequestError, ServerError, UnauthorizedError, errorFromAnswer } from "./errors.js";
import type { Credentials } from "./credentials.js";

export interface RequestOptions {
  body?: unknown;
  timeoutMs: number;
  signal?: AbortSignal;
}

/** One JSON request with the client's credential; typed errors for every non-2xx answer. */
export async function requestJSON<T>(
  fetchImpl: typeof fetch,
  creds: Credentials,
  method: string,
  url: string,
  opts: RequestOptions,
): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    const cred = await creds.get();
    const headers: Record<string, string> = { Authorization: `Bearer ${cred.value}`, Accept: "application/json" };
    let body: string | undefined;
    if (opts.body !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(opts.body);
    }
    const timeout = AbortSignal.timeout(opts.timeoutMs);
    const signal = opts.signal ? AbortSignal.any([opts.signal, timeout]) : timeout;
    let res: Response;
    let text: string;
    const what = `${method} ${new URL(url).pathname}`;
    try {
      res = await fetchImpl(url, { method, headers, body, signal });
      text = await res.text();
    } catch (err) {
      if (opts.signal?.aborted) throw opts.signal.reason ?? err;
      if (timeout.aborted) {
        throw new ServerError(`${what}: no answer within ${opts.timeoutMs} ms`, { status: 0, code: "timeout", cause: err });
      }
      throw new ServerError(`${what}: ${(err as Error)?.message ?? String(err)}`, { status: 0, code: "network_error", cause: err });
    }
    if (res.ok) {
      if (!text) return undefined as T;
      return JSON.parse(text) as T;
    }
    const e = errorFromAnswer(res.status, res.headers, text, what);
    // An expired token is refreshed once; a second 401 is final.
    if (e instanceof UnauthorizedError && e.code === "token_expired" && cred.refreshable && attempt === 0) {
      creds.invalidate(cred.value);
      continue;
    }
    throw e;
  }
}

export function joinURL(base: string, path: string, query?: Record<string, string | undefined>): string {
  const u = new URL(base.replace(/\/+$/, "") + path);
  if (query) for (const [k, v] of Object.entries(query)) if (v !== undefined) u.searchParams.set(k, v);
  return u.toString();
}

export function assertName(kind: string, name: string): void {
  if (typeof name !== "string" || !/^[A-Za-z0-9_-]{1,100}$/.test(name)) {
    throw new InvalidRequestError(`${kind} ${JSON.stringify(name)}: want 1-100 of [A-Za-z0-9_-]`, { status: 400, code: "invalid_request" });
  }
}
