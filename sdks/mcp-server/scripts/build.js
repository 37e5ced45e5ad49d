#!/usr/bin/env node
// prepack: builds the stdio MCP server (services/mcp/cmd/msgmesh-mcp, no
// Kafka or HTTP server code) for every platform into vendor/. Nothing is
// downloaded at install time: the tarball carries the binaries.
//
//   MSGMESH_MCP_PLATFORMS=host          only this machine's platform (tests)
//   MSGMESH_MCP_PLATFORMS=linux-x64,... a list (default: all six)
"use strict";

const { execFileSync } = require("node:child_process");
const fs = require("node:fs");
const path = require("node:path");

const all = {
  "linux-x64": ["linux", "amd64"],
  "linux-arm64": ["linux", "arm64"],
  "darwin-x64": ["darwin", "amd64"],
  "darwin-arm64": ["darwin", "arm64"],
  "win32-x64": ["windows", "amd64"],
  "win32-arm64": ["windows", "arm64"],
};

const pkgDir = path.join(__dirname, "..");
const root = path.join(pkgDir, "..", "..");
const version = JSON.parse(fs.readFileSync(path.join(pkgDir, "package.json"), "utf8")).version;

let wanted = (process.env.MSGMESH_MCP_PLATFORMS || "").trim();
if (wanted === "host") wanted = `${process.platform}-${process.arch}`;
const keys = wanted ? wanted.split(",").map((s) => s.trim()).filter(Boolean) : Object.keys(all);
for (const k of keys) {
  if (!all[k]) {
    console.error(`build: unknown platform ${k} (known: ${Object.keys(all).join(", ")})`);
    process.exit(2);
  }
}

const vendor = path.join(pkgDir, "vendor");
fs.rmSync(vendor, { recursive: true, force: true });
for (const k of keys) {
  const [goos, goarch] = all[k];
  const out = path.join(vendor, k, goos === "windows" ? "msgmesh-mcp.exe" : "msgmesh-mcp");
  const started = Date.now();
  execFileSync("go", ["build", "-trimpath", "-ldflags", `-s -w -X main.Version=${version}`, "-o", out, "./services/mcp/cmd/msgmesh-mcp"], {
    cwd: root,
    stdio: "inherit",
    env: { ...process.env, GOOS: goos, GOARCH: goarch, CGO_ENABLED: "0" },
  });
  console.error(`build: ${k} (${goos}/${goarch}) ${(fs.statSync(out).size / 1048576).toFixed(1)} MiB in ${((Date.now() - started) / 1000).toFixed(1)}s`);
}
