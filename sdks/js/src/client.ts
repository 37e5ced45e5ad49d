import { Credentials } from "./credentials.js";
import { assertName, joinURL, requestJSON } from "./http.js";
import { fromWire, headersToWire, type WireMessage } from "./message.js";
import type { Runtime } from "./runtime.js";
import { Subscription, type SubscriptionHost } from "./subscription.js";
import type {
  BatchMessage,
  Capability,
  CommitOptions,
  Message,
  MintedToken,
  MsgMeshOptions,
  PollOptions,
  PublishOptions,
  SubscribeOptions,
  Topic,
} from "./types.js";

interface WireTopic {
  name: string;
  partitions: number;
  kafka_topic: string;
  retention_ms: number;
  created_at: string;
  epoch: string;
}

function topicFromWire(t: WireTopic): Topic {
  return {
    name: t.name,
    partitions: t.partitions,
    kafkaTopic: t.kafka_topic,
    retentionMs: t.retention_ms,
    createdAt: t.created_at,
    epoch: t.epoch,
  };
}

/** The client core; MsgMesh (Node or browser build) binds it to its runtime. */
export class MsgMeshClient {
  readonly controlPlaneUrl: string;
  readonly gatewayUrl: string;
  readonly realtimeUrl: string;
  private readonly creds: Credentials;
  private readonly fetchImpl: typeof fetch;
  private readonly timeoutMs: number;
  private readonly host: SubscriptionHost;
  private readonly subs = new Set<Subscription<any>>();
  private readonly memories = new Map<string, Map<number, number>>();
  /** The last unacknowledged poll batch per (topic, group, consumer): sent as ack by the next poll. */
  private readonly batches = new Map<string, string>();
  private readonly aborts = new Set<AbortController>();
  private closed = false;

  constructor(options: MsgMeshOptions, runtime: Runtime) {
    const o = options ?? ({} as MsgMeshOptions);
    this.creds = new Credentials(o.apiKey, o.getToken);
    const cp = o.controlPlaneUrl ?? o.url;
    const gw = o.gatewayUrl ?? o.url;
    const rt = o.realtimeUrl ?? o.url;
    if (!cp || !gw || !rt) throw new TypeError("MsgMesh: pass url, or controlPlaneUrl, gatewayUrl and realtimeUrl");
    this.controlPlaneUrl = cp;
    this.gatewayUrl = gw;
    this.realtimeUrl = rt;
    const f = o.fetch ?? globalThis.fetch;
    if (typeof f !== "function") throw new TypeError("MsgMesh: no fetch (Node >= 20 or a browser has one)");
    this.fetchImpl = (input, init) => f(input, init);
    this.timeoutMs = o.requestTimeoutMs ?? 30_000;
    const minDelayMs = o.reconnect?.minDelayMs ?? 500;
    const maxDelayMs = Math.max(minDelayMs, o.reconnect?.maxDelayMs ?? 20_000);
    this.host = {
      creds: this.creds,
      fetch: this.fetchImpl,
      runtime,
      realtimeUrl: rt,
      minDelayMs,
      maxDelayMs,
      heartbeatTimeoutMs: o.heartbeatTimeoutMs ?? 45_000,
      memory: (topic, room) => {
        const k = `${topic}\u0000${room ?? "\u0000*"}`;
        let m = this.memories.get(k);
        if (!m) this.memories.set(k, (m = new Map()));
        return m;
      },
      forget: (sub) => {
        this.subs.delete(sub);
      },
    };
  }

  private req<T>(base: string, method: string, path: string, body?: unknown, extraMs = 0, signal?: AbortSignal): Promise<T> {
    if (this.closed) return Promise.reject(new TypeError("MsgMesh: the client is closed"));
    const ac = new AbortController();
    this.aborts.add(ac);
    const sig = signal ? AbortSignal.any([signal, ac.signal]) : ac.signal;
    return requestJSON<T>(this.fetchImpl, this.creds, method, joinURL(base, path), {
      body,
      timeoutMs: this.timeoutMs + extraMs,
      signal: sig,
    }).finally(() => this.aborts.delete(ac));
  }

  /** POST /v1/topics. */
  async createTopic(name: string, options: { partitions?: number } = {}): Promise<Topic> {
    assertName("topic", name);
    const body: Record<string, unknown> = { name };
    if (options.partitions !== undefined) body.partitions = options.partitions;
    return topicFromWire(await this.req<WireTopic>(this.controlPlaneUrl, "POST", "/v1/topics", body));
  }

  /** DELETE /v1/topics/{topic}. */
  async deleteTopic(name: string): Promise<void> {
    assertName("topic", name);
    await this.req<unknown>(this.controlPlaneUrl, "DELETE", `/v1/topics/${name}`);
  }

  /** GET /v1/topics. */
  async listTopics(): Promise<Topic[]> {
    const r = await this.req<{ topics: WireTopic[] }>(this.controlPlaneUrl, "GET", "/v1/topics");
    return (r?.topics ?? []).map(topicFromWire);
  }

  /** Publishes one message; answers after Kafka acknowledged it. */
  async publish(topic: string, data: unknown, options: PublishOptions = {}): Promise<{ cursor: string }> {
    assertName("topic", topic);
    const body: Record<string, unknown> = { data };
    if (options.room !== undefined) body.room = options.room;
    const h = headersToWire(options.headers);
    if (h !== undefined) body.headers = h;
    const r = await this.req<{ cursor: string }>(this.gatewayUrl, "POST", `/v1/topics/${topic}/messages`, body);
    return { cursor: r.cursor };
  }

  /** Publishes several messages in one request (all or nothing). */
  async publishBatch(topic: string, messages: BatchMessage[]): Promise<{ cursors: string[] }> {
    assertName("topic", topic);
    const wire = messages.map((m) => {
      const w: Record<string, unknown> = { data: m.data };
      if (m.room !== undefined) w.room = m.room;
      const h = headersToWire(m.headers);
      if (h !== undefined) w.headers = h;
      return w;
    });
    const r = await this.req<{ cursors: string[] }>(this.gatewayUrl, "POST", `/v1/topics/${topic}/messages`, { messages: wire });
    return { cursors: r.cursors };
  }

  /**
   * Long-polls the whole topic as a member of group. The batch returned is acknowledged by the
   * next poll of the same (topic, group, consumer); until then the server delivers it again.
   */
  async poll<T = unknown>(topic: string, options: PollOptions): Promise<Message<T>[]> {
    assertName("topic", topic);
    assertName("group", options.group);
    if (options.consumer !== undefined) assertName("consumer", options.consumer);
    const key = `${topic}\u0000${options.group}\u0000${options.consumer ?? ""}`;
    const body: Record<string, unknown> = { group: options.group };
    if (options.consumer !== undefined) body.consumer = options.consumer;
    if (options.max !== undefined) body.max = options.max;
    if (options.waitMs !== undefined) body.wait_ms = options.waitMs;
    const ack = this.batches.get(key);
    if (ack !== undefined) body.ack = ack;
    const r = await this.req<{ messages: WireMessage[]; batch?: string }>(
      this.gatewayUrl,
      "POST",
      `/v1/topics/${topic}/poll`,
      body,
      options.waitMs ?? 0,
      options.signal,
    );
    // The answer arrived, so the batch named in ack is committed; remember the new one.
    if (typeof r.batch === "string" && r.batch) this.batches.set(key, r.batch);
    else this.batches.delete(key);
    return (r.messages ?? []).map((m) => fromWire<T>(m));
  }

  /** Acknowledges cursors early (POST /v1/topics/{topic}/commit). */
  async commit(topic: string, options: CommitOptions): Promise<void> {
    assertName("topic", topic);
    const body: Record<string, unknown> = { group: options.group, cursors: options.cursors };
    if (options.consumer !== undefined) body.consumer = options.consumer;
    await this.req<unknown>(this.gatewayUrl, "POST", `/v1/topics/${topic}/commit`, body);
  }

  /** Mints a short-lived, downscoped token (server side, with a key that has tokens.mint). */
  async mintToken(options: { ttlSeconds?: number; capabilities?: Capability[] } = {}): Promise<MintedToken> {
    const body: Record<string, unknown> = {};
    if (options.ttlSeconds !== undefined) body.ttl_seconds = options.ttlSeconds;
    if (options.capabilities !== undefined) body.capabilities = options.capabilities;
    const r = await this.req<{ token: string; expires_at: string; ttl_seconds: number }>(this.controlPlaneUrl, "POST", "/v1/tokens", body);
    return { token: r.token, expiresAt: r.expires_at, ttlSeconds: r.ttl_seconds };
  }

  /** Subscribes (SSE by default, or WebSocket); see Subscription. */
  subscribe<T = unknown>(topic: string, options: SubscribeOptions<T>): Subscription<T> {
    if (this.closed) throw new TypeError("MsgMesh: the client is closed");
    assertName("topic", topic);
    if (typeof options?.onMessage !== "function") throw new TypeError("MsgMesh.subscribe: onMessage is required");
    const sub = new Subscription<T>(this.host, topic, options);
    if (sub.state !== "failed" && sub.state !== "closed") this.subs.add(sub);
    return sub;
  }

  /** Closes every subscription and aborts requests in flight; the client is unusable afterwards. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const s of [...this.subs]) s.close();
    this.subs.clear();
    for (const ac of this.aborts) ac.abort(new TypeError("MsgMesh: the client is closed"));
    this.aborts.clear();
  }
}
