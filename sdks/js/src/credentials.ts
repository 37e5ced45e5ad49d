import { MsgMeshError, UnauthorizedError, isUnauthorized } from "./errors.js";
import type { TokenResult } from "./types.js";

/** A credential ready to send; expiresAt in ms since the epoch (undefined: a key, or unknown). */
export interface Credential {
  value: string;
  expiresAt?: number;
  obtainedAt: number;
  /** True for a getToken token (refreshable), false for an API key. */
  refreshable: boolean;
}

/** A cached token is used while it has more than this left. */
const MIN_VALIDITY_MS = 2000;

/**
 * The one source of credentials of a client: the API key, or getToken's token, cached; concurrent
 * refreshes share one getToken call. A 401 from getToken (an UnauthorizedError, or any error with
 * status 401) is raised as UnauthorizedError; callers treat it as terminal.
 */
export class Credentials {
  private cached: Credential | undefined;
  private inflight: Promise<Credential> | undefined;

  constructor(
    private readonly apiKey: string | undefined,
    private readonly getToken: (() => Promise<TokenResult>) | undefined,
  ) {
    if (!apiKey && !getToken) throw new TypeError("MsgMesh: pass apiKey (server side) or getToken (browser)");
    if (apiKey && getToken) throw new TypeError("MsgMesh: pass either apiKey or getToken, not both");
  }

  get refreshable(): boolean {
    return this.getToken !== undefined;
  }

  /** The cached credential if it is still valid for a while, else a refreshed one. */
  get(minValidityMs = MIN_VALIDITY_MS): Promise<Credential> {
    if (this.apiKey) return Promise.resolve({ value: this.apiKey, obtainedAt: 0, refreshable: false });
    const c = this.cached;
    if (c && (c.expiresAt === undefined || c.expiresAt - Date.now() > minValidityMs)) return Promise.resolve(c);
    return this.refresh();
  }

  /**
   * A replacement for the credential `current` (about to expire): the cached one if another caller
   * already renewed it, else one getToken call shared by everyone who asks meanwhile.
   */
  renew(current: string): Promise<Credential> {
    if (this.apiKey) return this.get();
    const c = this.cached;
    if (c && c.value !== current && (c.expiresAt === undefined || c.expiresAt - Date.now() > MIN_VALIDITY_MS)) {
      return Promise.resolve(c);
    }
    return this.refresh();
  }

  /** Forget a credential the server refused as expired (only if it is still the cached one). */
  invalidate(value: string): void {
    if (this.cached?.value === value) this.cached = undefined;
  }

  /** Calls getToken, shared by everyone who asks while it runs. */
  refresh(): Promise<Credential> {
    if (this.apiKey) return this.get();
    if (this.inflight) return this.inflight;
    const p = (async () => {
      let r: TokenResult;
      try {
        r = await this.getToken!();
      } catch (err) {
        if (err instanceof MsgMeshError && !isUnauthorized(err)) throw err;
        if (isUnauthorized(err)) {
          throw err instanceof UnauthorizedError
            ? err
            : new UnauthorizedError(`getToken: ${(err as Error)?.message ?? String(err)}`, {
                status: 401,
                code: "get_token_unauthorized",
                cause: err,
              });
        }
        const status = typeof (err as { status?: unknown })?.status === "number" ? (err as { status: number }).status : 0;
        throw new MsgMeshError(`getToken failed: ${(err as Error)?.message ?? String(err)}`, {
          status,
          code: "get_token_failed",
          cause: err,
        });
      }
      const c = toCredential(r);
      this.cached = c;
      return c;
    })();
    this.inflight = p;
    const clear = () => {
      if (this.inflight === p) this.inflight = undefined;
    };
    p.then(clear, clear);
    return p;
  }
}

/** How long before expiry a token is refreshed: 30 s, or half the token's life when shorter. */
export function refreshLead(c: Credential): number {
  if (c.expiresAt === undefined) return 0;
  return Math.min(30_000, Math.max(0, (c.expiresAt - c.obtainedAt) / 2));
}

function toCredential(r: TokenResult): Credential {
  const now = Date.now();
  if (typeof r === "string") {
    if (!r) throw new UnauthorizedError("getToken returned an empty token", { status: 401, code: "get_token_unauthorized" });
    return { value: r, expiresAt: jwtExpiry(r), obtainedAt: now, refreshable: true };
  }
  if (!r || typeof r.token !== "string" || !r.token) {
    throw new UnauthorizedError("getToken returned no token", { status: 401, code: "get_token_unauthorized" });
  }
  let exp: number | undefined;
  if (r.expiresAt instanceof Date) exp = r.expiresAt.getTime();
  else if (typeof r.expiresAt === "number") exp = r.expiresAt;
  else if (typeof r.expiresAt === "string") exp = Date.parse(r.expiresAt);
  if (exp === undefined || Number.isNaN(exp)) exp = jwtExpiry(r.token);
  return { value: r.token, expiresAt: exp, obtainedAt: now, refreshable: true };
}

/** The exp claim of a JWT in ms (MsgMesh tokens are JWTs); undefined for anything else. */
function jwtExpiry(token: string): number | undefined {
  const parts = token.split(".");
  if (parts.length !== 3) return undefined;
  try {
    const b64 = parts[1]!.replace(/-/g, "+").replace(/_/g, "/");
    const json = JSON.parse(atob(b64 + "=".repeat((4 - (b64.length % 4)) % 4))) as { exp?: unknown };
    return typeof json.exp === "number" ? json.exp * 1000 : undefined;
  } catch {
    return undefined;
  }
}
