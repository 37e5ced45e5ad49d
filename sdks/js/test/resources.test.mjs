// Backoff bounds while upgrades are refused, and what clients leave behind.
import { test } from "node:test";
import assert from "node:assert/strict";
import { MsgMesh, ServerError } from "@msgmesh/sdk";
import { URL_, KEY, Proxy, admin, uniq, waitFor, sleep, recorder } from "./helpers.mjs";

const timers = () => process.getActiveResourcesInfo().filter((x) => x === "Timeout").length;
const sockets = () => process.getActiveResourcesInfo().filter((x) => x === "TCPSocketWrap").length;
function heapMB() {
  global.gc?.();
  global.gc?.();
  return process.memoryUsage().heapUsed / 2 ** 20;
}

test("websocket: while upgrades are refused, attempts stay within the backoff ceiling and heap and timers stay flat", async () => {
  assert.ok(global.gc, "run with --expose-gc (test.sh does)");
  const mm = admin();
  const topic = uniq("refuse");
  await mm.createTopic(topic);
  const proxy = await new Proxy(URL_).start();
  const reconnect = { minDelayMs: 10, maxDelayMs: 100 };
  const c = new MsgMesh({ url: proxy.url, apiKey: KEY, reconnect });
  const r = recorder();
  const s = c.subscribe(topic, { transport: "websocket", ...r.handlers });
  await waitFor(() => s.state === "live", "live");
  proxy.mode = "status";
  proxy.status = 503;
  const base = timers();
  proxy.cut();
  const start = proxy.accepted;
  await waitFor(() => proxy.accepted - start >= 15, "15 refused attempts");
  const heap1 = heapMB();
  let maxTimers = 0;
  const t0 = Date.now();
  while (Date.now() - t0 < 3000) {
    maxTimers = Math.max(maxTimers, timers());
    await sleep(7);
  }
  const heap2 = heapMB();
  const at = proxy.acceptedAt.slice(start);
  const gaps = at.slice(1).map((t, i) => t - at[i]);
  assert.ok(at.length >= 40, `kept retrying (${at.length} attempts)`);
  const ceiling = reconnect.maxDelayMs + 100; // plus the refused exchange and scheduling on a busy machine
  assert.ok(Math.max(...gaps.slice(5)) <= ceiling, `every gap within the ceiling: max ${Math.max(...gaps)} ms`);
  assert.ok(Math.min(...gaps) >= reconnect.minDelayMs - 2, `no gap below the floor: min ${Math.min(...gaps)} ms`);
  assert.ok(maxTimers <= base + 1, `timers stay flat: ${maxTimers} active at most, ${base} before`);
  assert.ok(heap2 - heap1 < 3, `heap stays flat: ${heap1.toFixed(1)} -> ${heap2.toFixed(1)} MiB`);
  const refused = r.errors.slice(1); // the first is the cut itself
  assert.ok(refused.length >= 40 && refused.every((e) => e instanceof ServerError && e.status === 503), `${refused.length} refusals reported`);
  assert.equal(s.state, "reconnecting");
  proxy.mode = "pass";
  await waitFor(() => s.state === "live", "live once upgrades are accepted");
  c.close();
  await proxy.close();
  await mm.deleteTopic(topic);
  mm.close();
});

test("1,000 clients created and closed leave no listener, timer or socket behind", async () => {
  const mm = admin();
  const topic = uniq("many");
  await mm.createTopic(topic);
  await mm.listTopics(); // the admin client's keep-alive socket is part of the baseline
  await sleep(100);
  const baseTimers = timers();
  const baseSockets = sockets();
  const baseExit = process.listenerCount("exit");
  const heap1 = heapMB();
  for (let round = 0; round < 10; round++) {
    const clients = [];
    for (let i = 0; i < 100; i++) {
      const c = new MsgMesh({ url: URL_, apiKey: KEY });
      c.subscribe(topic, { transport: i % 2 ? "websocket" : "sse", onMessage() {} });
      clients.push(c);
    }
    // A tenth of them get live before they are closed; the rest are closed while connecting.
    const live = clients.slice(0, 10).map((c) => c);
    await sleep(round === 0 ? 300 : 20);
    for (const c of clients) c.close();
    void live;
  }
  await waitFor(() => timers() <= baseTimers, `timers back to ${baseTimers} (now ${timers()})`, 10000);
  await waitFor(() => sockets() <= baseSockets + 1, `sockets back to ${baseSockets} (now ${sockets()})`, 15000);
  assert.equal(process.listenerCount("exit"), baseExit);
  const heap2 = heapMB();
  assert.ok(heap2 - heap1 < 10, `heap: ${heap1.toFixed(1)} -> ${heap2.toFixed(1)} MiB`);
  await mm.deleteTopic(topic);
  mm.close();
});
