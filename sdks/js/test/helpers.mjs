// Shared helpers of the SDK tests: the server under test, unique names, waiting on conditions,
// and a TCP proxy that cuts connections or answers upgrades/requests with an error status.
import net from "node:net";
import crypto from "node:crypto";
import { MsgMesh } from "@msgmesh/sdk";

export const URL_ = process.env.MSGMESH_TEST_URL;
export const KEY = process.env.MSGMESH_TEST_KEY;
if (!URL_ || !KEY) throw new Error("run through sdks/js/test.sh (MSGMESH_TEST_URL and MSGMESH_TEST_KEY are unset)");

export function uniq(prefix = "t") {
  return `${prefix}_${crypto.randomBytes(5).toString("hex")}`;
}

export function admin() {
  return new MsgMesh({ url: URL_, apiKey: KEY });
}

/** Waits until fn() is truthy (polling every 20 ms); fails with what after timeoutMs. */
export async function waitFor(fn, what, timeoutMs = 15000) {
  const t0 = Date.now();
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * A TCP proxy in front of msgmesh. mode "pass" forwards; "status" answers every new connection
 * with an HTTP error (status, code, request id) and closes it. cut() destroys every open
 * connection (both sides), as a network failure would.
 */
export class Proxy {
  constructor(target) {
    const u = new URL(target);
    this.host = u.hostname;
    this.port = Number(u.port);
    this.mode = "pass";
    this.status = 503;
    this.code = "kafka_unavailable";
    this.requestIds = [];
    this.accepted = 0;
    this.acceptedAt = [];
    this.sockets = new Set();
    this.server = net.createServer((client) => this.onConn(client));
  }

  async start() {
    await new Promise((r) => this.server.listen(0, "127.0.0.1", r));
    this.url = `http://127.0.0.1:${this.server.address().port}`;
    return this;
  }

  onConn(client) {
    this.accepted++;
    this.acceptedAt.push(Date.now());
    this.sockets.add(client);
    client.on("close", () => this.sockets.delete(client));
    client.on("error", () => {});
    if (this.mode === "status") {
      const rid = `proxy-${crypto.randomBytes(4).toString("hex")}`;
      this.requestIds.push(rid);
      const body = JSON.stringify({ error: "test proxy refuses", code: this.code, request_id: rid });
      const reason = { 401: "Unauthorized", 403: "Forbidden", 503: "Service Unavailable" }[this.status] ?? "Error";
      client.once("data", () => {
        client.end(
          `HTTP/1.1 ${this.status} ${reason}\r\nContent-Type: application/json\r\nX-Request-Id: ${rid}\r\n` +
            `Access-Control-Allow-Origin: *\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
        );
      });
      return;
    }
    const up = net.connect(this.port, this.host);
    this.sockets.add(up);
    up.on("close", () => {
      this.sockets.delete(up);
      client.destroy();
    });
    up.on("error", () => client.destroy());
    client.on("close", () => up.destroy());
    client.pipe(up);
    up.pipe(client);
  }

  cut() {
    for (const s of this.sockets) s.destroy();
  }

  async close() {
    this.cut();
    await new Promise((r) => this.server.close(r));
  }
}

/** Records everything a subscription reports. */
export function recorder() {
  const r = { messages: [], errors: [], states: [], resyncs: [] };
  r.handlers = {
    onMessage: (m) => r.messages.push(m),
    onError: (e) => r.errors.push(e),
    onStateChange: (s) => r.states.push(s),
    onResync: (e) => r.resyncs.push(e),
  };
  return r;
}

/** Publishes n messages spread over rooms r0..r(rooms-1), each with its per-room sequence. */
export async function publishSeq(client, topic, from, n, rooms) {
  for (let i = from; i < from + n; i++) {
    const room = `r${i % rooms}`;
    await client.publish(topic, { seq: i, room }, { room });
  }
}

/** Asserts every seq in [0, n) arrived exactly once and in publish order within each room. */
export function checkExactlyOnceInOrder(assert, messages, n) {
  const seen = new Map();
  const lastPerRoom = new Map();
  for (const m of messages) {
    const s = m.data.seq;
    seen.set(s, (seen.get(s) ?? 0) + 1);
    const last = lastPerRoom.get(m.room);
    if (last !== undefined) assert.ok(s > last, `room ${m.room}: seq ${s} after ${last}`);
    lastPerRoom.set(m.room, s);
  }
  const dups = [...seen].filter(([, c]) => c > 1).map(([s]) => s);
  assert.deepEqual(dups, [], "no message delivered twice");
  const missing = [];
  for (let i = 0; i < n; i++) if (!seen.has(i)) missing.push(i);
  assert.deepEqual(missing, [], "no message missing");
}
