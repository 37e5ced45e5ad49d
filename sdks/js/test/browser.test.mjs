// The browser bundle of the installed tarball in headless Chromium (Debian's /usr/bin/chromium):
// a page subscribes over SSE and WebSocket with a token from getToken and survives a cut.
import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";
import { URL_, Proxy, admin, uniq, waitFor, publishSeq } from "./helpers.mjs";

const devDir = process.env.MSGMESH_SDK_DEV_DIR;
const chromiumPath = process.env.MSGMESH_TEST_CHROMIUM ?? "/usr/bin/chromium";

test("browser bundle: subscribes with a token over SSE and WebSocket and survives a cut", async (t) => {
  assert.ok(devDir, "MSGMESH_SDK_DEV_DIR (set by test.sh) locates playwright-core");
  assert.ok(fs.existsSync(chromiumPath), `${chromiumPath} (apt-get install chromium)`);
  const { chromium } = createRequire(path.join(devDir, "package.json"))("playwright-core");
  const bundle = createRequire(import.meta.url).resolve("@msgmesh/sdk/browser");
  const src = fs.readFileSync(bundle, "utf8");
  assert.ok(!/from\s*["']ws["']|require\(["']ws["']\)/.test(src), "the browser bundle does not load ws");

  const mm = admin();
  const topic = uniq("web");
  await mm.createTopic(topic, { partitions: 3 });
  const proxy = await new Proxy(URL_).start();
  let tokenCalls = 0;
  const page = `<!doctype html><meta charset="utf-8"><title>msgmesh</title>
<script type="module">
import { MsgMesh } from "/sdk/browser.js";
window.out = { sse: [], websocket: [], states: [], errors: [] };
const mm = new MsgMesh({
  url: ${JSON.stringify(proxy.url)},
  reconnect: { minDelayMs: 50, maxDelayMs: 400 },
  getToken: async () => (await fetch("/token")).json(),
});
window.subs = {};
for (const transport of ["sse", "websocket"]) {
  window.subs[transport] = mm.subscribe(${JSON.stringify(topic)}, {
    transport,
    onMessage: (m) => window.out[transport].push(m.data.seq),
    onStateChange: (s) => window.out.states.push(transport + ":" + s),
    onError: (e) => window.out.errors.push(e.name + " " + e.message),
  });
}
// A key never goes into a WebSocket URL: browsers use getToken.
const keyed = new MsgMesh({ url: ${JSON.stringify(proxy.url)}, apiKey: "mm_not_sent_in_a_url_000000000000000000000000" });
window.keyed = { errors: [] };
window.keyed.sub = keyed.subscribe(${JSON.stringify(topic)}, { transport: "websocket", onMessage() {}, onError: (e) => window.keyed.errors.push([e.name, e.code]) });
</script>`;
  const site = http.createServer(async (req, res) => {
    if (req.url === "/") return res.writeHead(200, { "Content-Type": "text/html" }).end(page);
    if (req.url === "/sdk/browser.js") return res.writeHead(200, { "Content-Type": "text/javascript" }).end(src);
    if (req.url === "/token") {
      tokenCalls++;
      const tok = await mm.mintToken({ ttlSeconds: 120, capabilities: [{ ops: ["subscribe"], topics: [topic] }] });
      return res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify(tok));
    }
    res.writeHead(404).end();
  });
  await new Promise((r) => site.listen(0, "127.0.0.1", r));
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "msgmesh-chromium-"));
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: chromiumPath,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
  });
  t.after(async () => {
    await ctx.close().catch(() => {});
    fs.rmSync(profile, { recursive: true, force: true });
    site.close();
    await proxy.close();
    await mm.deleteTopic(topic).catch(() => {});
    mm.close();
  });
  const p = ctx.pages()[0] ?? (await ctx.newPage());
  const logs = [];
  p.on("console", (m) => logs.push(m.text()));
  p.on("pageerror", (e) => logs.push(String(e)));
  await p.goto(`http://127.0.0.1:${site.address().port}/`);
  const state = () => p.evaluate(() => ({ sse: window.subs?.sse?.state, ws: window.subs?.websocket?.state, n: [window.out?.sse.length, window.out?.websocket.length], errors: window.out?.errors }));
  await waitFor(async () => { const s = await state(); return s.sse === "live" && s.ws === "live"; }, `both live in the page (${logs.join(" | ")})`);
  assert.equal(tokenCalls, 1, "getToken called once up front for both subscriptions");
  assert.deepEqual(await p.evaluate(() => [window.keyed.sub.state, window.keyed.errors]), ["failed", [["InvalidRequestError", "key_in_url"]]]);
  await publishSeq(mm, topic, 0, 30, 3);
  await waitFor(async () => { const s = await state(); return s.n[0] >= 30 && s.n[1] >= 30; }, "30 messages on both");
  proxy.cut();
  await waitFor(async () => (await p.evaluate(() => window.out.states.filter((x) => x.endsWith(":reconnecting")).length)) >= 2, "both reconnecting");
  await publishSeq(mm, topic, 30, 30, 3);
  await waitFor(async () => { const s = await state(); return s.n[0] >= 60 && s.n[1] >= 60; }, "60 messages on both after the cut", 20000);
  await new Promise((r) => setTimeout(r, 300));
  const out = await p.evaluate(() => window.out);
  for (const tr of ["sse", "websocket"]) {
    const sorted = [...out[tr]].sort((a, b) => a - b);
    assert.deepEqual(sorted, Array.from({ length: 60 }, (_, i) => i), `${tr}: every message exactly once`);
  }
  assert.ok(proxy.accepted >= 4, "both reconnected through the proxy");
  assert.equal(await p.evaluate(() => window.subs.sse.state), "live");
  assert.equal(await p.evaluate(() => window.subs.websocket.state), "live");
});
