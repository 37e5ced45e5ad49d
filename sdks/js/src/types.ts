import type { MsgMeshError } from "./errors.js";

/** One message header, in record order (duplicates kept). valueBase64 when the value is not UTF-8. */
export interface Header {
  key: string;
  value?: string;
  valueBase64?: string;
}

/** Headers on publish: a list (kept in order, duplicates allowed) or an object of string values. */
export type HeadersInit = Header[] | Record<string, string>;

/** A message as delivered by poll, SSE and WebSocket. */
export interface Message<T = unknown> {
  /** "<partition>-<offset>". */
  cursor: string;
  partition: number;
  offset: number;
  room: string | null;
  /** The payload when it is JSON (undefined when dataBase64 is set). */
  data: T;
  /** The payload in standard base64 when it is not JSON. */
  dataBase64?: string;
  headers: Header[];
  /** RFC 3339. */
  publishedAt: string;
}

/** What getToken may answer: the token, or the token with its expiry. */
export type TokenResult = string | { token: string; expiresAt?: string | number | Date };

export interface ReconnectOptions {
  /** The first retry waits up to this long; default 500. */
  minDelayMs?: number;
  /** No retry waits longer; default 20000. */
  maxDelayMs?: number;
}

export interface MsgMeshOptions {
  /** A key (server side). Sent as Authorization: Bearer, never in a URL. */
  apiKey?: string;
  /** Fetches a short-lived token from your backend (browsers). Called once up front, then before expiry. */
  getToken?: () => Promise<TokenResult>;
  /** Base URL of all three services (all-in-one msgmesh), e.g. "http://127.0.0.1:8080". */
  url?: string;
  controlPlaneUrl?: string;
  gatewayUrl?: string;
  realtimeUrl?: string;
  reconnect?: ReconnectOptions;
  /**
   * A live connection that receives nothing (no event, heartbeat comment or frame) for this long is
   * considered dead and replaced; default 45000 (the server sends heartbeats every 15 s). Over
   * WebSocket the SDK sends a ping frame every third of it.
   */
  heartbeatTimeoutMs?: number;
  /** Timeout of one HTTP request in ms (poll adds its waitMs); default 30000. */
  requestTimeoutMs?: number;
  /** fetch implementation; default globalThis.fetch. */
  fetch?: typeof fetch;
}

export interface Topic {
  name: string;
  partitions: number;
  kafkaTopic: string;
  retentionMs: number;
  createdAt: string;
  epoch: string;
}

export interface PublishOptions {
  room?: string;
  headers?: HeadersInit;
}

export interface BatchMessage {
  data: unknown;
  room?: string;
  headers?: HeadersInit;
}

export interface PollOptions {
  group: string;
  consumer?: string;
  max?: number;
  waitMs?: number;
  signal?: AbortSignal;
}

export interface CommitOptions {
  group: string;
  consumer?: string;
  cursors: string[];
}

export interface Capability {
  ops: string[];
  topics: string[];
  rooms?: string[];
}

export interface MintedToken {
  token: string;
  expiresAt: string;
  ttlSeconds: number;
}

export type SubscriptionState = "connecting" | "live" | "reconnecting" | "failed" | "closed";

export interface ResyncEvent {
  /** window_records, window_age, retention, epoch (or what the server says). */
  reason: string;
  /** Where the stream continues. */
  position: string;
  /**
   * Seeds dedupe from the app's snapshot: cursors ("p-o") or {partition: highest offset}; later
   * messages at or below them are skipped.
   */
  seed(cursors: string[] | Record<number, number>): void;
}

export interface SubscribeOptions<T = unknown> {
  room?: string;
  /** A position (SSE id / WebSocket position) or message cursors "p-o[,...]" to resume after. */
  cursor?: string;
  /** Without a cursor: "latest" (default) or "earliest" (oldest inside the replay window). */
  from?: "latest" | "earliest";
  transport?: "sse" | "websocket";
  onMessage: (message: Message<T>) => void;
  onResync?: (event: ResyncEvent) => void;
  onError?: (error: MsgMeshError) => void;
  onStateChange?: (state: SubscriptionState, previous: SubscriptionState) => void;
}
