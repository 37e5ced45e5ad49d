#!/usr/bin/env node
// Runs MsgMesh's stdio MCP server: the binary for this platform that the
// package carries (vendor/<platform>-<arch>/), or the one named by
// MSGMESH_MCP_BINARY (e.g. a local `msgmesh` build: then "mcp" is passed
// as its first argument when the file is the full msgmesh binary).
"use strict";

const { spawn } = require("node:child_process");
const fs = require("node:fs");
const path = require("node:path");

const supported = ["linux-x64", "linux-arm64", "darwin-x64", "darwin-arm64", "win32-x64", "win32-arm64"];

function binary() {
  const override = process.env.MSGMESH_MCP_BINARY;
  if (override) {
    if (!fs.existsSync(override)) {
      fail(`MSGMESH_MCP_BINARY=${override} does not exist`);
    }
    // The full msgmesh binary serves MCP as a subcommand.
    const full = /^msgmesh(\.exe)?$/i.test(path.basename(override));
    return { file: override, args: full ? ["mcp"] : [] };
  }
  const key = `${process.platform}-${process.arch}`;
  if (!supported.includes(key)) {
    fail(`no MsgMesh MCP server binary for ${key} (supported: ${supported.join(", ")}); ` +
      "build one with `go build ./services/mcp/cmd/msgmesh-mcp` and set MSGMESH_MCP_BINARY");
  }
  const file = path.join(__dirname, "..", "vendor", key, process.platform === "win32" ? "msgmesh-mcp.exe" : "msgmesh-mcp");
  if (!fs.existsSync(file)) {
    fail(`this package has no binary for ${key} (${file} is missing; it was packed without it). ` +
      "Set MSGMESH_MCP_BINARY to a local msgmesh-mcp or msgmesh binary");
  }
  return { file, args: [] };
}

function fail(msg) {
  process.stderr.write(`@msgmesh/mcp-server: ${msg}\n`);
  process.exit(2);
}

const { file, args } = binary();
const child = spawn(file, [...args, ...process.argv.slice(2)], { stdio: "inherit", windowsHide: true });
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(sig, () => {
    if (!child.killed) child.kill(sig);
  });
}
child.on("error", (err) => fail(`cannot run ${file}: ${err.message}`));
child.on("exit", (code, signal) => {
  if (signal) {
    process.kill(process.pid, signal);
    return;
  }
  process.exit(code ?? 1);
});
