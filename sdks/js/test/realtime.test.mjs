// Subscriptions against the real server, through a TCP proxy that cuts connections.
import { test } from "node:test";
import assert from "node:assert/strict";
import { MsgMesh, ServerError, UnauthorizedError, ForbiddenError, NotFoundError } from "@msgmesh/sdk";
import { URL_, KEY, Proxy, admin, uniq, waitFor, sleep, recorder, publishSeq, checkExactlyOnceInOrder } from "./helpers.mjs";

const fast = { minDelayMs: 50, maxDelayMs: 400 };

for (const transport of ["sse", "websocket"]) {
  test(`${transport}: a 3-partition stream cut twice mid-way delivers every message exactly once, in order per room`, async () => {
    const mm = admin();
    const topic = uniq("cut");
    await mm.createTopic(topic, { partitions: 3 });
    const proxy = await new Proxy(URL_).start();
    const sub = new MsgMesh({ url: proxy.url, apiKey: KEY, reconnect: fast });
    const r = recorder();
    const s = sub.subscribe(topic, { transport, ...r.handlers });
    await waitFor(() => s.state === "live", "live");
    const N = 240;
    const publishing = publishSeq(mm, topic, 0, N, 6);
    await waitFor(() => r.messages.length >= 60, "first messages");
    proxy.cut();
    await waitFor(() => r.messages.length >= 140, "messages after the first cut");
    proxy.cut();
    await publishing;
    await waitFor(() => r.messages.length >= N, `${N} messages`, 20000);
    await sleep(300);
    checkExactlyOnceInOrder(assert, r.messages, N);
    assert.equal(new Set(r.messages.map((m) => m.partition)).size, 3, "the rooms span 3 partitions");
    assert.ok(proxy.accepted >= 3, `reconnected (${proxy.accepted} connections)`);
    assert.ok(r.states.includes("reconnecting"));
    assert.equal(s.state, "live");
    sub.close();
    assert.equal(s.state, "closed");
    await proxy.close();
    await mm.deleteTopic(topic);
    mm.close();
  });

  test(`${transport}: beyond the replay window onResync is called, then the stream goes on live`, async () => {
    const mm = admin();
    const topic = uniq("resync");
    await mm.createTopic(topic, { partitions: 1 });
    const first = await mm.publish(topic, { seq: -1 });
    // The server under test keeps a replay window of 50 records (test.sh).
    await mm.publishBatch(topic, Array.from({ length: 60 }, (_, i) => ({ data: { seq: i } })));
    const r = recorder();
    const c = new MsgMesh({ url: URL_, apiKey: KEY, reconnect: fast });
    const s = c.subscribe(topic, {
      transport,
      cursor: first.cursor,
      ...r.handlers,
      onResync: (ev) => {
        r.resyncs.push(ev);
        ev.seed([`0-${1000}`]); // a snapshot that already covers offsets up to 1000
      },
    });
    await waitFor(() => r.resyncs.length === 1, "onResync");
    assert.equal(r.resyncs[0].reason, "window_records");
    assert.ok(r.resyncs[0].position);
    await waitFor(() => s.state === "live", "live");
    await mm.publish(topic, { seq: 100 });
    await sleep(500);
    assert.equal(r.messages.length, 0, "offsets covered by the seeded snapshot are skipped");
    s.seed([]); // nothing new
    c.close();
    // Without the seed, the stream delivers new messages after the resync.
    const r2 = recorder();
    const c2 = new MsgMesh({ url: URL_, apiKey: KEY });
    const s2 = c2.subscribe(topic, { transport, cursor: first.cursor, ...r2.handlers });
    await waitFor(() => r2.resyncs.length === 1 && s2.state === "live", "resync and live");
    await mm.publish(topic, { seq: 101 });
    await waitFor(() => r2.messages.some((m) => m.data.seq === 101), "live message after the resync");
    c2.close();
    await mm.deleteTopic(topic);
    mm.close();
  });

  test(`${transport}: a 503 on reconnect surfaces a ServerError with its requestId and schedules the next attempt`, async () => {
    const mm = admin();
    const topic = uniq("503");
    await mm.createTopic(topic);
    const proxy = await new Proxy(URL_).start();
    const c = new MsgMesh({ url: proxy.url, apiKey: KEY, reconnect: fast });
    const r = recorder();
    const s = c.subscribe(topic, { transport, ...r.handlers });
    await waitFor(() => s.state === "live", "live");
    proxy.mode = "status";
    proxy.status = 503;
    proxy.cut();
    await waitFor(() => r.errors.filter((e) => e.status === 503).length >= 2, "two 503 attempts");
    const e = r.errors.find((x) => x.status === 503);
    assert.ok(e instanceof ServerError);
    assert.equal(e.code, "kafka_unavailable");
    assert.ok(proxy.requestIds.includes(e.requestId), `requestId ${e.requestId} is the answer's X-Request-Id`);
    assert.equal(s.state, "reconnecting");
    proxy.mode = "pass";
    await waitFor(() => s.state === "live", "live again");
    await mm.publish(topic, { after: true });
    await waitFor(() => r.messages.length === 1, "a message after recovering");
    c.close();
    await proxy.close();
    await mm.deleteTopic(topic);
    mm.close();
  });

  test(`${transport}: a server's 403 (suspended tenant) is retried with backoff until it lifts`, async () => {
    const mm = admin();
    const topic = uniq("403");
    await mm.createTopic(topic);
    const proxy = await new Proxy(URL_).start();
    proxy.mode = "status";
    proxy.status = 403;
    proxy.code = "tenant_suspended";
    const c = new MsgMesh({ url: proxy.url, apiKey: KEY, reconnect: fast });
    const r = recorder();
    const s = c.subscribe(topic, { transport, ...r.handlers });
    await waitFor(() => r.errors.length >= 3, "three refused attempts");
    assert.ok(r.errors.every((e) => e instanceof ForbiddenError && e.code === "tenant_suspended"));
    assert.notEqual(s.state, "failed");
    proxy.mode = "pass";
    await waitFor(() => s.state === "live", "live once the suspension lifted");
    c.close();
    await proxy.close();
    await mm.deleteTopic(topic);
    mm.close();
  });

  test(`${transport}: a token expiring mid-stream is refreshed with no loss`, async () => {
    const mm = admin();
    const topic = uniq("exp");
    await mm.createTopic(topic, { partitions: 3 });
    let calls = 0;
    const c = new MsgMesh({
      url: URL_,
      reconnect: fast,
      getToken: async () => {
        calls++;
        const t = await mm.mintToken({ ttlSeconds: 4, capabilities: [{ ops: ["subscribe"], topics: [topic] }] });
        return { token: t.token, expiresAt: t.expiresAt };
      },
    });
    const r = recorder();
    const s = c.subscribe(topic, { transport, ...r.handlers });
    await waitFor(() => s.state === "live", "live");
    const N = 60;
    const t0 = Date.now();
    for (let i = 0; i < N; i++) {
      await mm.publish(topic, { seq: i }, { room: `r${i % 3}` });
      await sleep(Math.max(0, t0 + i * 100 - Date.now())); // 6 s: past the first token's expiry
    }
    await waitFor(() => r.messages.length >= N, `${N} messages`);
    await sleep(200);
    checkExactlyOnceInOrder(assert, r.messages, N);
    assert.ok(calls >= 2, `getToken called again before expiry (${calls} calls)`);
    assert.ok(!r.states.includes("failed"));
    assert.deepEqual(r.errors.filter((e) => e instanceof UnauthorizedError), []);
    c.close();
    await mm.deleteTopic(topic);
    mm.close();
  });

  test(`${transport}: getToken answering 401 is terminal; 403 retries with backoff`, async () => {
    const mm = admin();
    const topic = uniq("auth");
    await mm.createTopic(topic);
    // 401: one call, state failed, UnauthorizedError.
    let calls401 = 0;
    const c1 = new MsgMesh({
      url: URL_,
      reconnect: fast,
      getToken: async () => {
        calls401++;
        throw new UnauthorizedError("your session ended", { status: 401 });
      },
    });
    const r1 = recorder();
    const s1 = c1.subscribe(topic, { transport, ...r1.handlers });
    await waitFor(() => s1.state === "failed", "failed");
    await sleep(3 * fast.maxDelayMs);
    assert.equal(calls401, 1, "no retry after a 401");
    assert.equal(r1.errors.length, 1);
    assert.ok(r1.errors[0] instanceof UnauthorizedError);
    c1.close();

    // A foreign error with status 401 (e.g. the backend's fetch answer) counts as a 401 too.
    const c1b = new MsgMesh({ url: URL_, getToken: async () => Promise.reject(Object.assign(new Error("401 from /token"), { status: 401 })) });
    const r1b = recorder();
    const s1b = c1b.subscribe(topic, { transport, ...r1b.handlers });
    await waitFor(() => s1b.state === "failed", "failed (foreign 401)");
    assert.ok(r1b.errors[0] instanceof UnauthorizedError);
    c1b.close();

    // A server's 401 (unknown key) is terminal too.
    const c1c = new MsgMesh({ url: URL_, apiKey: "mm_" + "B".repeat(43), reconnect: fast });
    const r1c = recorder();
    const s1c = c1c.subscribe(topic, { transport, ...r1c.handlers });
    await waitFor(() => s1c.state === "failed", "failed (server 401)");
    assert.ok(r1c.errors[0] instanceof UnauthorizedError);
    assert.equal(r1c.errors[0].status, 401);
    c1c.close();

    // 403 twice, then a token: retried with backoff, then live.
    const times = [];
    const c2 = new MsgMesh({
      url: URL_,
      reconnect: fast,
      getToken: async () => {
        times.push(Date.now());
        if (times.length <= 2) throw new ForbiddenError("tenant suspended", { status: 403, code: "tenant_suspended" });
        return (await mm.mintToken({ ttlSeconds: 60 })).token;
      },
    });
    const r2 = recorder();
    const s2 = c2.subscribe(topic, { transport, ...r2.handlers });
    await waitFor(() => s2.state === "live", "live after two 403s");
    assert.equal(times.length, 3);
    for (let i = 1; i < times.length; i++) assert.ok(times[i] - times[i - 1] >= fast.minDelayMs - 5, "backed off");
    assert.equal(r2.errors.filter((e) => e instanceof ForbiddenError).length, 2);
    c2.close();
    await mm.deleteTopic(topic);
    mm.close();
  });

  test(`${transport}: deleting the topic ends a live subscription with NotFoundError`, async () => {
    const mm = admin();
    const topic = uniq("del");
    await mm.createTopic(topic);
    const c = new MsgMesh({ url: URL_, apiKey: KEY, reconnect: fast });
    const r = recorder();
    const s = c.subscribe(topic, { transport, ...r.handlers });
    await waitFor(() => s.state === "live", "live");
    await mm.deleteTopic(topic);
    await waitFor(() => s.state === "failed", "failed after the deletion");
    const e = r.errors.at(-1);
    assert.ok(e instanceof NotFoundError, String(e));
    assert.ok(["topic_deleted", "topic_not_found"].includes(e.code), e.code);
    c.close();
    mm.close();
  });

  test(`${transport}: an unknown topic fails with NotFoundError`, async () => {
    const c = new MsgMesh({ url: URL_, apiKey: KEY, reconnect: fast });
    const r = recorder();
    const s = c.subscribe(uniq("none"), { transport, ...r.handlers });
    await waitFor(() => s.state === "failed", "failed");
    assert.ok(r.errors[0] instanceof NotFoundError, String(r.errors[0]));
    c.close();
  });
}

test("dedupe holds across a resubscribe and a transport switch on the same client", async () => {
  const mm = admin();
  const topic = uniq("resub");
  await mm.createTopic(topic, { partitions: 3 });
  await publishSeq(mm, topic, 0, 30, 3);
  const c = new MsgMesh({ url: URL_, apiKey: KEY });
  const r = recorder();
  const s1 = c.subscribe(topic, { transport: "sse", from: "earliest", ...r.handlers });
  await waitFor(() => r.messages.length >= 30, "30 messages over SSE");
  s1.close();
  await publishSeq(mm, topic, 30, 15, 3);
  // From the start again, over WebSocket: the first 30 are skipped, the new 15 delivered.
  const s2 = c.subscribe(topic, { transport: "websocket", from: "earliest", ...r.handlers });
  await waitFor(() => r.messages.length >= 45, "45 messages");
  await sleep(300);
  checkExactlyOnceInOrder(assert, r.messages, 45);
  s2.close();
  c.close();
  await mm.deleteTopic(topic);
  mm.close();
});
