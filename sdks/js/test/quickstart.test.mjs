// The README quick start, run as written against the installed tarball.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { URL_, KEY, admin } from "./helpers.mjs";

test("README quick start runs as written", async () => {
  const readme = fs.readFileSync(path.join(process.env.MSGMESH_SDK_DEV_DIR, "README.md"), "utf8");
  const block = /```js\n(\/\/ quickstart\.mjs\n[\s\S]*?)```/.exec(readme);
  assert.ok(block, "README.md has a ```js block starting with // quickstart.mjs");
  const file = path.join(process.cwd(), "quickstart.mjs");
  fs.writeFileSync(file, block[1]);
  const { stdout } = await promisify(execFile)(process.execPath, [file], {
    env: { ...process.env, MSGMESH_URL: URL_, MSGMESH_KEY: KEY },
    timeout: 30000,
  });
  assert.match(stdout, /published \d+-\d+/);
  assert.match(stdout, /received \d+-\d+ \{ id: 42, total: 9\.5 \}/);
  assert.match(stdout, /polled 1 message/);
  const mm = admin();
  await mm.deleteTopic("orders");
  mm.close();
});
