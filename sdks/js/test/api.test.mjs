// HTTP methods against the real server, and typed errors in ESM and CommonJS.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import * as esm from "@msgmesh/sdk";
import { URL_, KEY, admin, uniq } from "./helpers.mjs";

const cjs = createRequire(import.meta.url)("@msgmesh/sdk");

test("topics: create, list, publish with room and headers, batch, poll, commit, delete", async () => {
  const mm = admin();
  const topic = uniq("api");
  const t = await mm.createTopic(topic, { partitions: 3 });
  assert.equal(t.name, topic);
  assert.equal(t.partitions, 3);
  assert.ok((await mm.listTopics()).some((x) => x.name === topic));

  const one = await mm.publish(topic, { id: 1 }, { room: "eu", headers: { trace: "abc" } });
  assert.match(one.cursor, /^\d+-\d+$/);
  const batch = await mm.publishBatch(topic, [{ data: 2 }, { data: 3, room: "us" }]);
  assert.equal(batch.cursors.length, 2);

  const got = [];
  for (let i = 0; i < 10 && got.length < 3; i++) {
    got.push(...(await mm.poll(topic, { group: "g1", consumer: "c1", waitMs: 1000, max: 10 })));
  }
  assert.equal(got.length, 3);
  const first = got.find((m) => m.cursor === one.cursor);
  assert.ok(first, "the published message is polled");
  assert.deepEqual(first.data, { id: 1 });
  assert.equal(first.room, "eu");
  const [p, o] = one.cursor.split("-").map(Number);
  assert.equal(first.partition, p);
  assert.equal(first.offset, o);
  assert.ok(first.headers.some((h) => h.key === "trace" && h.value === "abc"), JSON.stringify(first.headers));
  assert.ok(!Number.isNaN(Date.parse(first.publishedAt)));
  await mm.commit(topic, { group: "g1", consumer: "c1", cursors: got.map((m) => m.cursor) });

  await mm.deleteTopic(topic);
  assert.ok(!(await mm.listTopics()).some((x) => x.name === topic));
  mm.close();
});

test("mintToken answers a token that works for what it allows", async () => {
  const mm = admin();
  const topic = uniq("tok");
  await mm.createTopic(topic);
  const t = await mm.mintToken({ ttlSeconds: 60, capabilities: [{ ops: ["publish"], topics: [topic] }] });
  assert.equal(t.ttlSeconds, 60);
  assert.ok(Date.parse(t.expiresAt) > Date.now());
  const tc = new esm.MsgMesh({ url: URL_, getToken: async () => t.token });
  assert.match((await tc.publish(topic, "hi")).cursor, /^\d+-\d+$/);
  await assert.rejects(tc.createTopic(uniq("no")), (e) => e instanceof esm.ForbiddenError && e.status === 403);
  tc.close();
  await mm.deleteTopic(topic);
  mm.close();
});

for (const [name, mod] of [["ESM", esm], ["CommonJS", cjs]]) {
  test(`typed errors with instanceof (${name})`, async () => {
    const mm = new mod.MsgMesh({ url: URL_, apiKey: KEY });
    const missing = uniq("missing");
    await assert.rejects(mm.publish(missing, 1), (e) => {
      assert.ok(e instanceof mod.NotFoundError, `${e}`);
      assert.ok(e instanceof mod.MsgMeshError);
      assert.ok(!(e instanceof mod.ServerError));
      assert.equal(e.status, 404);
      assert.equal(e.code, "topic_not_found");
      assert.ok(e.requestId, "requestId from X-Request-Id");
      return true;
    });
    const topic = uniq("dup");
    await mm.createTopic(topic);
    await assert.rejects(mm.createTopic(topic), (e) => e instanceof mod.ConflictError && e.status === 409);
    await assert.rejects(mm.createTopic(uniq("p"), { partitions: 100000 }), (e) => e instanceof mod.InvalidRequestError);
    await assert.rejects(mm.publish(topic, "x".repeat(2 << 20)), (e) => e instanceof mod.PayloadTooLargeError && e.status === 413);
    const bad = new mod.MsgMesh({ url: URL_, apiKey: "mm_" + "A".repeat(43) });
    await assert.rejects(bad.listTopics(), (e) => e instanceof mod.UnauthorizedError && e.status === 401);
    const down = new mod.MsgMesh({ url: "http://127.0.0.1:9", apiKey: KEY });
    await assert.rejects(down.listTopics(), (e) => e instanceof mod.ServerError && e.status === 0 && e.code === "network_error");
    await mm.deleteTopic(topic);
    mm.close();
  });
}

test("errors of one build are instanceof the classes of the other (one brand across ESM and CJS)", () => {
  const e = new cjs.RateLimitError("slow down", { status: 429, retryAfter: 3 });
  assert.ok(e instanceof esm.RateLimitError);
  assert.ok(e instanceof esm.MsgMeshError);
  assert.ok(!(e instanceof esm.ServerError));
  assert.equal(e.retryAfter, 3);
  assert.ok(new esm.ServerError("x") instanceof cjs.MsgMeshError);
});
