import type { EventSourceMessage } from "eventsource-parser";
import { HEALTHY_AFTER_MS, backoffDelay } from "./backoff.js";
import { refreshLead, type Credential, type Credentials } from "./credentials.js";
import {
  ForbiddenError,
  InvalidRequestError,
  MsgMeshError,
  NotFoundError,
  ServerError,
  UnauthorizedError,
  errorFor,
  errorFromAnswer,
  statusOfCode,
} from "./errors.js";
import { joinURL } from "./http.js";
import { Dedupe, fromWire, type WireMessage } from "./message.js";
import type { Runtime } from "./runtime.js";
import { SSEFeed } from "./sse-feed.js";
import type { ResyncEvent, SubscribeOptions, SubscriptionState } from "./types.js";

/** What a subscription needs from its client. */
export interface SubscriptionHost {
  readonly creds: Credentials;
  readonly fetch: typeof fetch;
  readonly runtime: Runtime;
  readonly realtimeUrl: string;
  readonly minDelayMs: number;
  readonly maxDelayMs: number;
  readonly heartbeatTimeoutMs: number;
  /** Highest delivered offsets per partition of (topic, room), kept by the client across subscriptions. */
  memory(topic: string, room: string | undefined): Map<number, number>;
  forget(sub: Subscription<any>): void;
}

interface Conn {
  cred: Credential;
  close(): void;
  send?(text: string): void;
  refreshing?: boolean;
}

type Mode = "backoff" | "now" | "fail";

/**
 * One subscription: one connection at a time (SSE or WebSocket), resumed from the last position it
 * delivered, reconnected with full-jitter backoff, deduped per partition.
 */
export class Subscription<T = unknown> {
  private _state: SubscriptionState = "connecting";
  private _position: string | undefined;
  private readonly dedupe: Dedupe;
  private readonly memory: Map<number, number>;
  private attempt = 0;
  /** Generation of the current connection: callbacks of any other generation are ignored. */
  private gen = 0;
  private conn: Conn | undefined;
  private retryTimer: ReturnType<typeof setTimeout> | undefined;
  private healthyTimer: ReturnType<typeof setTimeout> | undefined;
  private refreshTimer: ReturnType<typeof setTimeout> | undefined;
  private watchTimer: ReturnType<typeof setInterval> | undefined;
  /** When the current connection last received anything. */
  private lastSeen = 0;
  /** An immediate reconnect (expired token) was used since the last healthy connection. */
  private nowUsed = false;
  private done = false;
  readonly topic: string;
  private readonly opts: SubscribeOptions<T>;

  constructor(
    private readonly host: SubscriptionHost,
    topic: string,
    opts: SubscribeOptions<T>,
  ) {
    this.topic = topic;
    this.opts = opts;
    this.memory = host.memory(topic, opts.room);
    this.dedupe = new Dedupe(this.memory);
    void this.connect();
  }

  /** connecting, live, reconnecting, failed or closed. */
  get state(): SubscriptionState {
    return this._state;
  }

  /** The position to resume from (SSE id / WebSocket position); undefined until the server sent one. */
  get position(): string | undefined {
    return this._position;
  }

  /** Seeds dedupe (e.g. from a snapshot after onResync): cursors "p-o" or {partition: highest offset}. */
  seed(cursors: string[] | Record<number, number>): void {
    this.dedupe.seed(cursors);
    this.dedupe.mergeInto(this.memory);
  }

  /** Ends the subscription; no callback runs after it returns. */
  close(): void {
    if (this.done) return;
    this.done = true;
    this.dropConn();
    this.setState("closed");
    this.host.forget(this);
  }

  private setState(s: SubscriptionState): void {
    const prev = this._state;
    if (prev === s) return;
    this._state = s;
    this.safe(() => this.opts.onStateChange?.(s, prev));
  }

  private safe(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      // An exception in an application callback must not break the stream (nor crash the
      // process): it is reported like an event listener's, and the message counts as delivered.
      const report = (globalThis as { reportError?: (e: unknown) => void }).reportError;
      if (typeof report === "function") report(err);
      else console.error("@msgmesh/sdk: a subscription callback threw:", err);
    }
  }

  private emitError(e: MsgMeshError): void {
    if (this.opts.onError) this.safe(() => this.opts.onError!(e));
  }

  private clearTimers(): void {
    for (const t of [this.retryTimer, this.healthyTimer, this.refreshTimer]) if (t !== undefined) clearTimeout(t);
    if (this.watchTimer !== undefined) clearInterval(this.watchTimer);
    this.retryTimer = this.healthyTimer = this.refreshTimer = this.watchTimer = undefined;
  }

  /** Closes the current connection; its late callbacks and tokens are ignored from now on. */
  private dropConn(): void {
    this.gen++;
    this.clearTimers();
    const c = this.conn;
    this.conn = undefined;
    if (c) {
      try {
        c.close();
      } catch {
        /* already closed */
      }
    }
  }

  private async connect(): Promise<void> {
    const gen = ++this.gen;
    let cred: Credential;
    try {
      cred = await this.host.creds.get();
    } catch (err) {
      if (gen === this.gen && !this.done) this.end(gen, err);
      return;
    }
    // A token that arrives for a connection already replaced (or a closed subscription) is dropped.
    if (gen !== this.gen || this.done) return;
    if (this.opts.transport === "websocket") this.openWS(gen, cred);
    else this.openSSE(gen, cred);
  }

  /** Ends connection gen: fail for good, reconnect at once, or back off. */
  private end(gen: number, err?: unknown, mode?: Mode): void {
    if (gen !== this.gen || this.done) return;
    const cred = this.conn?.cred;
    this.dropConn();
    const e = err === undefined ? undefined : asMsgMeshError(err);
    if (mode === undefined) mode = e ? modeFor(e) : "backoff";
    if (mode !== "fail" && e instanceof UnauthorizedError) {
      // An expired token: fetch a new one and reconnect from the position, once; any other 401 is final.
      if (e.code === "token_expired" && cred?.refreshable && !this.nowUsed) {
        this.host.creds.invalidate(cred.value);
        mode = "now";
      } else {
        mode = "fail";
      }
    }
    if (mode === "now" && this.nowUsed) mode = "backoff";
    if (mode === "fail") {
      this.done = true;
      this.setState("failed");
      if (e) this.emitError(e);
      this.host.forget(this);
      return;
    }
    if (e && mode === "backoff") this.emitError(e);
    let delay = 0;
    if (mode === "now") this.nowUsed = true;
    else delay = backoffDelay(this.attempt++, this.host.minDelayMs, this.host.maxDelayMs);
    if (e?.retryAfter !== undefined) delay = Math.max(delay, e.retryAfter * 1000);
    this.setState("reconnecting");
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      void this.connect();
    }, delay);
  }

  private onLive(gen: number, cred: Credential): void {
    if (gen !== this.gen) return;
    this.setState("live");
    if (this.healthyTimer === undefined) {
      this.healthyTimer = setTimeout(() => {
        this.healthyTimer = undefined;
        this.attempt = 0;
        this.nowUsed = false;
      }, HEALTHY_AFTER_MS);
    }
    this.scheduleRefresh(gen, cred);
    this.watch(gen);
  }

  /** Replaces a live connection that went silent (a half-open TCP connection never errors). */
  private watch(gen: number): void {
    this.lastSeen = Date.now();
    if (this.watchTimer !== undefined) return;
    const limit = this.host.heartbeatTimeoutMs;
    this.watchTimer = setInterval(() => {
      if (gen !== this.gen) return;
      const idle = Date.now() - this.lastSeen;
      if (idle > limit) {
        this.end(gen, new ServerError(`nothing received for ${idle} ms: reconnecting`, { code: "heartbeat_timeout" }));
        return;
      }
      this.conn?.send?.(JSON.stringify({ type: "ping" }));
    }, Math.max(10, Math.floor(limit / 3)));
  }

  private scheduleRefresh(gen: number, cred: Credential): void {
    if (this.refreshTimer !== undefined) clearTimeout(this.refreshTimer);
    this.refreshTimer = undefined;
    if (!cred.refreshable || cred.expiresAt === undefined) return;
    const at = cred.expiresAt - refreshLead(cred);
    this.refreshTimer = setTimeout(() => {
      this.refreshTimer = undefined;
      void this.refresh(gen);
    }, Math.max(1000, at - Date.now()));
  }

  /** Before expiry: WebSocket sends refresh in place; SSE reconnects from its position. */
  private async refresh(gen: number): Promise<void> {
    const conn = this.conn;
    if (gen !== this.gen || !conn || conn.refreshing) return;
    conn.refreshing = true;
    let cred: Credential;
    try {
      cred = await this.host.creds.renew(conn.cred.value);
    } catch (err) {
      this.end(gen, err);
      return;
    } finally {
      conn.refreshing = false;
    }
    if (gen !== this.gen || this.done || this.conn !== conn) return; // replaced meanwhile: discard
    if (conn.send) {
      conn.cred = cred;
      conn.send(JSON.stringify({ type: "refresh", token: cred.value }));
      this.scheduleRefresh(gen, cred);
      return;
    }
    this.dropConn();
    void this.connect();
  }

  private deliver(gen: number, raw: WireMessage): void {
    if (gen !== this.gen) return;
    let msg;
    try {
      msg = fromWire<T>(raw);
    } catch (err) {
      this.emitError(new ServerError(`malformed message: ${(err as Error).message}`, { code: "malformed_message" }));
      return;
    }
    if (!this.dedupe.admit(msg.partition, msg.offset)) return;
    const h = this.memory.get(msg.partition);
    if (h === undefined || msg.offset > h) this.memory.set(msg.partition, msg.offset);
    this.safe(() => this.opts.onMessage(msg));
  }

  private resync(gen: number, reason: string, position: string): void {
    if (gen !== this.gen || !this.opts.onResync) return;
    const ev: ResyncEvent = { reason, position, seed: (c) => this.seed(c) };
    this.safe(() => this.opts.onResync!(ev));
  }

  /** msgmesh-closed (SSE) and the closed frame (WebSocket). */
  private closedBy(gen: number, reason: string, text: string): void {
    if (reason === "topic_deleted") {
      this.end(gen, new NotFoundError(text || `topic ${this.topic} was deleted`, { status: 404, code: "topic_deleted" }), "fail");
    } else if (reason === "token_expired") {
      this.end(gen, new UnauthorizedError(text || "token expired", { status: 401, code: "token_expired" }));
    } else if (reason === "shutdown") {
      this.end(gen, undefined, "backoff");
    } else {
      this.end(gen, new ServerError(text || `stream closed: ${reason}`, { status: 503, code: reason || "closed" }), "backoff");
    }
  }

  // --- SSE -----------------------------------------------------------------------------------

  private openSSE(gen: number, cred: Credential): void {
    const ac = new AbortController();
    this.conn = { cred, close: () => ac.abort() };
    const pos = this._position;
    const o = this.opts;
    const url = joinURL(this.host.realtimeUrl, `/v1/topics/${encodeURIComponent(this.topic)}/events`, {
      room: o.room,
      cursor: pos ?? o.cursor,
      from: pos ?? o.cursor ? undefined : o.from,
    });
    const headers: Record<string, string> = { Authorization: `Bearer ${cred.value}`, Accept: "text/event-stream" };
    if (pos) headers["Last-Event-ID"] = pos;
    void (async () => {
      let res: Response;
      try {
        res = await this.host.fetch(url, { headers, signal: ac.signal, cache: "no-store" });
      } catch (err) {
        if (!ac.signal.aborted) this.end(gen, new ServerError(`SSE connect: ${(err as Error)?.message ?? err}`, { code: "network_error", cause: err }));
        return;
      }
      if (gen !== this.gen) {
        ac.abort();
        return;
      }
      if (!res.ok || !res.body) {
        const text = await res.text().catch(() => "");
        this.end(gen, errorFromAnswer(res.status, res.headers, text, `GET /v1/topics/${this.topic}/events`));
        return;
      }
      this.onLive(gen, cred);
      const feed = new SSEFeed(
        (ev) => this.onSSEEvent(gen, ev),
        (id) => {
          if (gen === this.gen) this._position = id;
        },
      );
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done || gen !== this.gen) break;
          this.lastSeen = Date.now();
          feed.feed(value);
        }
      } catch (err) {
        if (!ac.signal.aborted) this.end(gen, new ServerError(`SSE stream broke: ${(err as Error)?.message ?? err}`, { code: "network_error", cause: err }));
        return;
      } finally {
        reader.cancel().catch(() => {});
      }
      this.end(gen, new ServerError("the SSE stream ended", { code: "stream_ended" }));
    })();
  }

  private onSSEEvent(gen: number, ev: EventSourceMessage): void {
    if (gen !== this.gen) return;
    switch (ev.event) {
      case undefined:
      case "message": {
        let raw: WireMessage;
        try {
          raw = JSON.parse(ev.data) as WireMessage;
        } catch {
          if (ev.id) this._position = ev.id;
          return;
        }
        if (ev.id) this._position = ev.id;
        this.deliver(gen, raw);
        return;
      }
      case "msgmesh-resync": {
        let d: { reason?: string; position?: string } = {};
        try {
          d = JSON.parse(ev.data);
        } catch {
          /* keep defaults */
        }
        const position = ev.id || d.position || "";
        if (position) this._position = position;
        this.resync(gen, d.reason ?? "unknown", position);
        return;
      }
      case "msgmesh-closed": {
        let d: { reason?: string; error?: string } = {};
        try {
          d = JSON.parse(ev.data);
        } catch {
          /* keep defaults */
        }
        if (ev.id) this._position = ev.id;
        this.closedBy(gen, d.reason ?? "", d.error ?? "");
        return;
      }
      default:
        if (ev.id) this._position = ev.id;
    }
  }

  // --- WebSocket -----------------------------------------------------------------------------

  private openWS(gen: number, cred: Credential): void {
    if (!this.host.runtime.headerAuth && !cred.refreshable) {
      // A browser WebSocket can only carry the credential in the URL, where keys are refused
      // (and would leak into logs): browsers use getToken.
      this.conn = { cred, close: () => {} };
      this.end(
        gen,
        new InvalidRequestError("a browser WebSocket cannot send an API key in a header: use getToken", { status: 400, code: "key_in_url" }),
        "fail",
      );
      return;
    }
    const base = this.host.realtimeUrl.replace(/^http/, "ws");
    const url = joinURL(base, "/v1/ws");
    const id = `s${gen}`;
    let opened = false;
    const ws = this.host.runtime.openWebSocket(url, cred.value, {
      onOpen: () => {
        if (gen !== this.gen) return;
        opened = true;
        const o = this.opts;
        const f: Record<string, string> = { type: "subscribe", id, topic: this.topic };
        if (o.room !== undefined) f.room = o.room;
        const cursor = this._position ?? o.cursor;
        if (cursor) f.cursor = cursor;
        else if (o.from) f.from = o.from;
        ws.send(JSON.stringify(f));
      },
      onMessage: (text) => {
        if (gen !== this.gen) return;
        this.lastSeen = Date.now();
        this.onWSFrame(gen, id, text);
      },
      onClose: (code, reason, err) => {
        if (gen !== this.gen) return;
        if (err && !opened) return this.end(gen, err);
        if (code === 4001) return this.end(gen, new UnauthorizedError(reason || "token expired", { status: 401, code: "token_expired" }));
        if (code === 4003) {
          return this.end(gen, new ForbiddenError(reason || "credential revoked or tenant suspended", { status: 403, code: "forbidden" }));
        }
        if (code === 1001) return this.end(gen, undefined, "backoff");
        this.end(gen, new ServerError(`WebSocket closed ${code}${reason ? `: ${reason}` : ""}`, { code: "websocket_closed" }));
      },
    });
    this.conn = { cred, close: () => ws.close(1000, "client closed"), send: (t) => ws.send(t) };
  }

  private onWSFrame(gen: number, id: string, text: string): void {
    let f: Record<string, any>;
    try {
      f = JSON.parse(text);
    } catch {
      return;
    }
    if (f.id !== undefined && f.id !== id && f.type !== "error") return;
    switch (f.type) {
      case "subscribed":
        if (typeof f.position === "string") this._position = f.position;
        if (this.conn) this.onLive(gen, this.conn.cred);
        return;
      case "message":
        if (typeof f.position === "string") this._position = f.position;
        this.deliver(gen, f.message as WireMessage);
        return;
      case "resync":
        if (typeof f.position === "string") this._position = f.position;
        this.resync(gen, String(f.reason ?? "unknown"), String(f.position ?? ""));
        return;
      case "unsubscribed":
        if (f.reason === "topic_deleted") return this.closedBy(gen, "topic_deleted", "");
        if (f.reason === "forbidden") {
          return this.end(gen, new ForbiddenError("the refreshed credential may not make this subscription", { status: 403, code: "forbidden" }));
        }
        return this.end(gen, new ServerError(`unsubscribed: ${f.reason ?? "by the server"}`, { code: String(f.reason ?? "unsubscribed") }));
      case "error": {
        const code = String(f.code ?? "unknown");
        return this.end(gen, errorFor(statusOfCode(code), `WebSocket: ${code}: ${f.error ?? ""}`, { code }));
      }
      case "token-expiring":
        void this.refresh(gen);
        return;
      case "closed":
        return this.closedBy(gen, String(f.reason ?? ""), String(f.error ?? ""));
      default:
        return; // refreshed, pong, and frames added later
    }
  }
}

function asMsgMeshError(err: unknown): MsgMeshError {
  if (err instanceof MsgMeshError) return err;
  return new MsgMeshError((err as Error)?.message ?? String(err), { cause: err });
}

/** 400/404/409/413/422 are final; 401 is decided in end(); 403, 429, 5xx and network errors back off. */
function modeFor(e: MsgMeshError): Mode {
  const s = e.status;
  if (s === 400 || s === 404 || s === 409 || s === 413 || s === 422) return "fail";
  return "backoff";
}
