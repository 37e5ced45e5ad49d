#!/bin/sh
# Packs @msgmesh/mcp-server (the host platform's binary only, to stay
# quick), installs the tarball into an empty folder and checks that the
# installed bin, and npx of the tarball, answer tools/list over stdio.
# No msgmesh is needed: tools/list does not call the API.
#
#   sdks/mcp-server/test.sh          (from anywhere; about a minute)
#   MSGMESH_MCP_PLATFORMS=all ...    pack all six platforms instead
set -eu
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM

platforms=${MSGMESH_MCP_PLATFORMS:-host}
[ "$platforms" = all ] && platforms=
echo "mcp-server: npm pack (platforms: ${platforms:-all six})"
tgz=$(cd "$here" && MSGMESH_MCP_PLATFORMS=$platforms npm pack --silent --pack-destination "$work" | tail -n 1)
tgz="$work/$tgz"
[ -f "$tgz" ] || { echo "mcp-server: npm pack wrote no tarball" >&2; exit 1; }
# The tarball carries the shim and the binaries (vendor/ is gitignored).
listing=$(tar -tzf "$tgz")
echo "$listing" | grep -q '^package/bin/msgmesh-mcp-server.js$' || { echo "tarball lacks the bin shim" >&2; exit 1; }
echo "$listing" | grep -q '^package/vendor/.*/msgmesh-mcp' || { echo "tarball lacks a binary" >&2; exit 1; }

app="$work/app"
mkdir -p "$app"
(cd "$app" && npm init -y >/dev/null && npm install --silent --no-audit --no-fund "$tgz")

# tools/list over stdio, old-style (initialize) and 2026-07-28 (stateless).
cat > "$work/list.js" <<'JS'
const { spawn } = require("node:child_process");
const [cmd, ...args] = process.argv.slice(2);
const child = spawn(cmd, args, { stdio: ["pipe", "pipe", "inherit"], env: { ...process.env, MQ_API_KEY: "mm_placeholder_key_for_tools_list_only_000", MQ_URL: "http://127.0.0.1:9" } });
const send = (m) => child.stdin.write(JSON.stringify(m) + "\n");
let buf = "";
const timer = setTimeout(() => { console.error("no tools/list answer in 60s"); child.kill(); process.exit(1); }, 60000);
child.stdout.on("data", (d) => {
  buf += d;
  let i;
  while ((i = buf.indexOf("\n")) >= 0) {
    const line = buf.slice(0, i); buf = buf.slice(i + 1);
    const msg = JSON.parse(line);
    if (msg.id === 1) {
      send({ jsonrpc: "2.0", method: "notifications/initialized" });
      send({ jsonrpc: "2.0", id: 2, method: "tools/list" });
    } else if (msg.id === 2) {
      const names = (msg.result?.tools ?? []).map((t) => t.name).sort();
      const want = ["create_topic", "describe_topic", "inspect_dead_letters", "list_topics", "list_webhooks", "poll", "publish", "replay_dead_letters", "watch_topic"];
      clearTimeout(timer);
      child.stdin.end();
      if (JSON.stringify(names) !== JSON.stringify(want)) { console.error("tools/list:", JSON.stringify(msg)); process.exit(1); }
      console.log("tools/list:", names.join(" "));
    }
  }
});
child.on("exit", (code) => { if (code !== 0 && code !== null) { console.error("server exited", code); process.exit(1); } });
send({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "test.sh", version: "1" } } });
JS
echo "mcp-server: installed bin"
(cd "$app" && node "$work/list.js" ./node_modules/.bin/msgmesh-mcp-server)
echo "mcp-server: npx of the tarball in an empty folder"
empty="$work/empty"
mkdir -p "$empty"
(cd "$empty" && node "$work/list.js" npx --yes --cache "$work/npx-cache" --package "$tgz" msgmesh-mcp-server)
echo "mcp-server: MSGMESH_MCP_BINARY override"
bad=$(cd "$app" && MSGMESH_MCP_BINARY=/nonexistent ./node_modules/.bin/msgmesh-mcp-server 2>&1 || true)
echo "$bad" | grep -q "MSGMESH_MCP_BINARY=/nonexistent does not exist" || { echo "override: $bad" >&2; exit 1; }
bin=$(ls "$app"/node_modules/@msgmesh/mcp-server/vendor/*/msgmesh-mcp* | head -n 1)
(cd "$app" && MSGMESH_MCP_BINARY="$bin" node "$work/list.js" ./node_modules/.bin/msgmesh-mcp-server)
echo "mcp-server: ok"
