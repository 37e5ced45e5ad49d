// Behaviour that needs exact control of what the server sends, against small fake servers:
// overlapping offsets on a new WebSocket while the old one still delivers; the wire decisions of
// CONTRACT.md (id-only SSE events, msgmesh-closed reasons, the WebSocket closed frame, poll ack);
// token refresh coalescing and late tokens.
import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { WebSocketServer } from "ws";
import { MsgMesh, NotFoundError, UnauthorizedError, RateLimitError } from "@msgmesh/sdk";
import { waitFor, sleep, recorder } from "./helpers.mjs";

const fast = { minDelayMs: 20, maxDelayMs: 100 };

function msg(cursor, data) {
  return { cursor, room: null, data, headers: [], published_at: new Date().toISOString() };
}

async function listen(handler) {
  const server = http.createServer(handler);
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return { server, url: `http://127.0.0.1:${server.address().port}` };
}

async function fakeWS(onConnection) {
  const { server, url } = await listen((req, res) => res.writeHead(404).end());
  const wss = new WebSocketServer({ server, path: "/v1/ws" });
  const conns = [];
  wss.on("connection", (ws, req) => {
    const frames = [];
    const conn = { ws, req, frames, n: conns.length };
    conns.push(conn);
    ws.on("message", (d) => {
      const f = JSON.parse(d.toString());
      frames.push(f);
      onConnection(conn, f);
    });
  });
  return {
    url,
    conns,
    close: async () => {
      for (const c of wss.clients) c.terminate();
      wss.close();
      await new Promise((r) => server.close(r));
    },
  };
}

const send = (ws, f) => ws.readyState === ws.OPEN && ws.send(JSON.stringify(f));

test("websocket: on a new connection already seen offsets are skipped, the same offset of another partition is delivered, the old connection's frames are ignored", async () => {
  const fake = await fakeWS((conn, f) => {
    if (f.type !== "subscribe") return;
    const { ws } = conn;
    const id = f.id;
    if (conn.n === 0) {
      send(ws, { type: "subscribed", id, position: "e1.0--" });
      send(ws, { type: "message", id, position: "e1.1--", message: msg("0-0", { n: "0-0" }) });
      send(ws, { type: "message", id, position: "e1.2--", message: msg("0-1", { n: "0-1" }) });
      send(ws, { type: "message", id, position: "e1.3--", message: msg("0-2", { n: "0-2" }) });
      send(ws, { type: "closed", topic: f.topic, reason: "shutdown", error: "node stopping" });
      // The old connection still delivers after the SDK replaced it: ignored.
      const stale = setInterval(() => send(ws, { type: "message", id, position: "e1.9--", message: msg("0-8", { stale: true }) }), 5);
      ws.on("close", () => clearInterval(stale));
      return;
    }
    send(ws, { type: "subscribed", id, position: f.cursor });
    send(ws, { type: "message", id, position: "e1.2--", message: msg("0-1", { n: "0-1 again" }) });
    send(ws, { type: "message", id, position: "e1.3--", message: msg("0-2", { n: "0-2 again" }) });
    send(ws, { type: "message", id, position: "e1.4--", message: msg("0-3", { n: "0-3" }) });
    send(ws, { type: "message", id, position: "e1.4-3-", message: msg("1-2", { n: "1-2" }) });
    send(ws, { type: "message", id, position: "e1.5-3-", message: msg("0-4", { n: "0-4" }) });
  });
  const c = new MsgMesh({ url: fake.url, apiKey: "mm_test", reconnect: fast });
  const r = recorder();
  const s = c.subscribe("orders", { transport: "websocket", ...r.handlers });
  await waitFor(() => r.messages.length >= 6, "6 messages");
  await sleep(100);
  assert.deepEqual(r.messages.map((m) => m.data.n), ["0-0", "0-1", "0-2", "0-3", "1-2", "0-4"]);
  assert.equal(fake.conns.length, 2, "one connection at a time: exactly one reconnect");
  assert.equal(fake.conns[1].frames[0].cursor, "e1.3--", "resubscribed from the last delivered position");
  assert.equal(fake.conns[0].req.headers.authorization, "Bearer mm_test", "Node sends the key in the header, never in the URL");
  assert.ok(!fake.conns[0].req.url.includes("token="));
  assert.equal(s.position, "e1.5-3-");
  c.close();
  await fake.close();
});

test("websocket: closed topic_deleted is terminal (NotFoundError); close 4001 refreshes the token and reconnects at once", async () => {
  let tokens = 0;
  const fake = await fakeWS((conn, f) => {
    if (f.type !== "subscribe") return;
    if (conn.n === 0) {
      send(conn.ws, { type: "subscribed", id: f.id, position: "e.0" });
      conn.ws.close(4001, "token expired");
    } else {
      send(conn.ws, { type: "subscribed", id: f.id, position: "e.0" });
      send(conn.ws, { type: "closed", topic: f.topic, reason: "topic_deleted", error: "topic orders was deleted" });
    }
  });
  const c = new MsgMesh({ url: fake.url, reconnect: { minDelayMs: 5000, maxDelayMs: 5000 }, getToken: async () => `tok${++tokens}` });
  const r = recorder();
  const s = c.subscribe("orders", { transport: "websocket", ...r.handlers });
  await waitFor(() => s.state === "failed", "failed", 3000); // well before the 5 s backoff
  assert.equal(tokens, 2, "a new token after 4001");
  assert.equal(fake.conns[1].req.url.includes("token="), false);
  assert.equal(fake.conns[1].req.headers.authorization, "Bearer tok2");
  assert.ok(r.errors.at(-1) instanceof NotFoundError);
  assert.equal(r.errors.at(-1).code, "topic_deleted");
  c.close();
  await fake.close();
});

test("websocket: token-expiring refreshes in place; concurrent refreshes share one getToken call; a late token for a replaced connection is discarded", async () => {
  let calls = 0;
  let release;
  const fake = await fakeWS((conn, f) => {
    if (f.type === "subscribe") send(conn.ws, { type: "subscribed", id: f.id, position: "e.0" });
    if (f.type === "refresh") send(conn.ws, { type: "refreshed", expires_at: new Date(Date.now() + 3600e3).toISOString() });
  });
  const c = new MsgMesh({
    url: fake.url,
    reconnect: fast,
    getToken: async () => {
      calls++;
      if (calls === 1) return { token: "t1", expiresAt: Date.now() + 3600e3 };
      await new Promise((r) => (release = r));
      return { token: `t${calls}`, expiresAt: Date.now() + 3600e3 };
    },
  });
  const a = c.subscribe("orders", { transport: "websocket", onMessage() {} });
  const b = c.subscribe("orders", { transport: "websocket", onMessage() {} });
  await waitFor(() => a.state === "live" && b.state === "live", "both live");
  assert.equal(calls, 1, "getToken called once up front, then cached");
  const [ca, cb] = fake.conns;
  send(ca.ws, { type: "token-expiring", expires_at: new Date(Date.now() + 1000).toISOString() });
  send(cb.ws, { type: "token-expiring", expires_at: new Date(Date.now() + 1000).toISOString() });
  await waitFor(() => release, "getToken in flight");
  await sleep(50);
  assert.equal(calls, 2, "two subscriptions, one refresh call");
  // Subscription b's connection is replaced while the token is on its way.
  cb.ws.close(1001, "going away");
  await waitFor(() => fake.conns.length === 3 && b.state === "live", "b reconnected");
  release();
  await waitFor(() => ca.frames.some((f) => f.type === "refresh"), "refresh on a's connection");
  await sleep(100);
  assert.deepEqual(ca.frames.filter((f) => f.type === "refresh").map((f) => f.token), ["t2"]);
  assert.equal(cb.frames.filter((f) => f.type === "refresh").length, 0, "no refresh on the replaced connection");
  assert.equal(fake.conns[2].frames.filter((f) => f.type === "refresh").length, 0, "the late token is not sent on the new connection");
  c.close();
  await fake.close();
});

test("sse: id-only events move the position without a message; msgmesh-closed shutdown, token_expired and topic_deleted", async () => {
  const reqs = [];
  const { server, url } = await listen((req, res) => {
    reqs.push({ at: Date.now(), lastEventId: req.headers["last-event-id"], auth: req.headers.authorization, url: req.url });
    res.writeHead(200, { "Content-Type": "text/event-stream" });
    const n = reqs.length;
    if (n === 1) {
      res.write("retry: 100\n\nid: e1.5\n\n");
      setTimeout(() => res.end('event: msgmesh-closed\ndata: {"reason":"shutdown","error":"node stopping"}\n\n'), 100);
    } else if (n === 2) {
      res.write(`id: e1.6\ndata: ${JSON.stringify(msg("0-5", { n: 5 }))}\n\n`);
      res.write("id: e1.7\r\n\r\n"); // CRLF, id only
      setTimeout(() => res.end('event: msgmesh-closed\ndata: {"reason":"token_expired","error":"token expired"}\n\n'), 100);
    } else {
      res.end('id: e1.7\n\nevent: msgmesh-closed\ndata: {"reason":"topic_deleted","error":"deleted"}\n\n');
    }
  });
  let tokens = 0;
  const c = new MsgMesh({ url, reconnect: { minDelayMs: 300, maxDelayMs: 300 }, getToken: async () => `tok${++tokens}` });
  const r = recorder();
  const s = c.subscribe("orders", { ...r.handlers });
  await waitFor(() => s.position === "e1.5", "position from the id-only event");
  assert.equal(r.messages.length, 0, "an id-only event is not a message");
  await waitFor(() => s.state === "failed", "failed on topic_deleted");
  assert.equal(reqs.length, 3);
  assert.equal(reqs[0].lastEventId, undefined);
  assert.ok(reqs[0].url.includes("/v1/topics/orders/events"));
  assert.equal(reqs[1].lastEventId, "e1.5", "resumed from the id-only position after shutdown");
  assert.ok(reqs[1].at - reqs[0].at >= 300, "shutdown reconnects with backoff");
  assert.equal(reqs[2].lastEventId, "e1.7", "the id-only position after a message");
  assert.ok(reqs[2].at - reqs[1].at < 250, "token_expired reconnects at once");
  assert.equal(reqs[2].auth, "Bearer tok2", "with a new token");
  assert.deepEqual(r.messages.map((m) => m.cursor), ["0-5"]);
  assert.ok(r.errors.at(-1) instanceof NotFoundError);
  c.close();
  await new Promise((res) => server.close(res));
});

test("poll: the previous batch is sent as ack by the next poll, kept across a failed poll, dropped after an empty answer", async () => {
  const bodies = [];
  const answers = [
    [200, { messages: [msg("0-0", 1), msg("1-0", 2)], batch: "b1" }],
    [503, { error: "kafka", code: "kafka_unavailable", request_id: "r1" }],
    [200, { messages: [msg("0-1", 3)], batch: "b2" }],
    [200, { messages: [] }],
    [200, { messages: [msg("0-2", 4)] }], // a server without batch ids (before the ack change)
    [200, { messages: [] }],
  ];
  const { server, url } = await listen((req, res) => {
    let b = "";
    req.on("data", (c) => (b += c));
    req.on("end", () => {
      bodies.push(JSON.parse(b));
      const [status, body] = answers[bodies.length - 1];
      res.writeHead(status, { "Content-Type": "application/json", "X-Request-Id": `rid${bodies.length}` }).end(JSON.stringify(body));
    });
  });
  const c = new MsgMesh({ url, apiKey: "mm_test" });
  const p = () => c.poll("orders", { group: "g", consumer: "c", waitMs: 10 });
  assert.deepEqual((await p()).map((m) => m.cursor), ["0-0", "1-0"]);
  await assert.rejects(p(), (e) => e.status === 503 && e.requestId === "rid2");
  assert.deepEqual((await p()).map((m) => m.data), [3]);
  assert.deepEqual(await p(), []);
  assert.equal((await p()).length, 1);
  await p();
  assert.deepEqual(
    bodies.map((b) => b.ack),
    [undefined, "b1", "b1", "b2", undefined, undefined],
  );
  assert.deepEqual(bodies[0], { group: "g", consumer: "c", wait_ms: 10 });
  c.close();
  await new Promise((res) => server.close(res));
});

test("a live connection that goes silent is replaced after heartbeatTimeoutMs (SSE and WebSocket, which also pings)", async () => {
  const reqs = [];
  const { server, url } = await listen((req, res) => {
    reqs.push(Date.now());
    res.writeHead(200, { "Content-Type": "text/event-stream" });
    res.write("id: e.0\n\n"); // then silence, connection left open
  });
  const c = new MsgMesh({ url, apiKey: "mm_test", heartbeatTimeoutMs: 300, reconnect: fast });
  const r = recorder();
  c.subscribe("orders", { ...r.handlers });
  await waitFor(() => reqs.length >= 2, "an SSE reconnect after silence", 3000);
  assert.ok(reqs[1] - reqs[0] >= 300, "not before the timeout");
  assert.equal(r.errors[0].code, "heartbeat_timeout");
  c.close();
  server.closeAllConnections();
  await new Promise((res) => server.close(res));

  const fake = await fakeWS((conn, f) => {
    if (f.type === "subscribe") send(conn.ws, { type: "subscribed", id: f.id, position: "e.0" });
    // pings are never answered
  });
  const c2 = new MsgMesh({ url: fake.url, apiKey: "mm_test", heartbeatTimeoutMs: 300, reconnect: fast });
  c2.subscribe("orders", { transport: "websocket", onMessage() {} });
  await waitFor(() => fake.conns.length >= 2, "a WebSocket reconnect after silence", 3000);
  assert.ok(fake.conns[0].frames.some((f) => f.type === "ping"), "the SDK pinged");
  c2.close();
  await fake.close();
});

test("backoff grows while refused and resets to its first step after a healthy connection", async () => {
  const reqs = [];
  let open;
  const { server, url } = await listen((req, res) => {
    reqs.push(Date.now());
    if (reqs.length <= 4) {
      return res.writeHead(503, { "Content-Type": "application/json", "X-Request-Id": `r${reqs.length}` }).end('{"error":"down","code":"not_ready"}');
    }
    res.writeHead(200, { "Content-Type": "text/event-stream" });
    res.write("id: e.0\n\n");
    open = res;
  });
  const min = 200;
  const c = new MsgMesh({ url, apiKey: "mm_test", reconnect: { minDelayMs: min, maxDelayMs: 10000 } });
  const r = recorder();
  const s = c.subscribe("orders", { ...r.handlers });
  await waitFor(() => s.state === "live", "live after four 503s", 10000);
  const gaps = reqs.slice(1).map((t, i) => t - reqs[i]);
  assert.ok(gaps[0] >= min - 5 && gaps[0] < min + 100, `attempt 0 waits min: ${gaps}`);
  for (const [i, g] of gaps.entries()) assert.ok(g >= min - 5 && g <= min * 2 ** i + 100, `gap ${i} = ${g} within [min, min*2^${i}]`);
  assert.equal(r.errors.length, 4);
  assert.deepEqual(r.errors.map((e) => e.requestId), ["r1", "r2", "r3", "r4"]);
  // Healthy for more than 5 s, then cut: the next attempt is the first step again.
  await sleep(5300);
  const before = reqs.length;
  const cutAt = Date.now();
  open.destroy();
  await waitFor(() => reqs.length > before, "reconnect after the cut");
  const g = reqs[before] - cutAt;
  assert.ok(g >= min - 5 && g < min + 100, `after a healthy connection the backoff restarts at min: ${g} ms`);
  c.close();
  server.closeAllConnections();
  await new Promise((res) => server.close(res));
});

test("HTTP: an expired token is renewed once and the request repeated; 429 carries retryAfter", async () => {
  const seen = [];
  const answers = [
    [401, { "X-Request-Id": "a" }, { error: "expired", code: "token_expired" }],
    [200, {}, { cursor: "0-7" }],
    [401, {}, { error: "expired", code: "token_expired" }],
    [401, {}, { error: "expired", code: "token_expired" }],
    [429, { "Retry-After": "7" }, { error: "slow down", code: "rate_limited" }],
  ];
  const { server, url } = await listen((req, res) => {
    seen.push(req.headers.authorization);
    const [status, headers, body] = answers[seen.length - 1];
    res.writeHead(status, { "Content-Type": "application/json", ...headers }).end(JSON.stringify(body));
  });
  let n = 0;
  const c = new MsgMesh({ url, getToken: async () => ({ token: `tok${++n}`, expiresAt: Date.now() + 3600e3 }) });
  assert.deepEqual(await c.publish("orders", 1), { cursor: "0-7" });
  assert.deepEqual(seen, ["Bearer tok1", "Bearer tok2"]);
  await assert.rejects(c.publish("orders", 2), (e) => e instanceof UnauthorizedError && e.code === "token_expired");
  assert.deepEqual(seen.slice(2), ["Bearer tok2", "Bearer tok3"], "renewed once, then final");
  await assert.rejects(c.publish("orders", 3), (e) => e instanceof RateLimitError && e.retryAfter === 7 && e.status === 429);
  c.close();
  await new Promise((res) => server.close(res));
});

test("an exception in onMessage does not stop the subscription", async () => {
  const fake = await fakeWS((conn, f) => {
    if (f.type !== "subscribe") return;
    send(conn.ws, { type: "subscribed", id: f.id, position: "e.0" });
    for (let i = 0; i < 3; i++) send(conn.ws, { type: "message", id: f.id, position: `e.${i + 1}`, message: msg(`0-${i}`, i) });
  });
  const orig = console.error;
  const reported = [];
  console.error = (...a) => reported.push(a);
  try {
    const c = new MsgMesh({ url: fake.url, apiKey: "mm_test" });
    const got = [];
    const s = c.subscribe("orders", {
      transport: "websocket",
      onMessage: (m) => {
        got.push(m.data);
        if (m.data === 0) throw new Error("app bug");
      },
    });
    await waitFor(() => got.length === 3, "all three messages");
    assert.equal(s.state, "live");
    assert.equal(reported.length, 1);
    assert.match(String(reported[0][1]), /app bug/);
    c.close();
  } finally {
    console.error = orig;
    await fake.close();
  }
});
