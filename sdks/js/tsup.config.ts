import { defineConfig } from "tsup";

export default defineConfig([
  {
    // Node: ESM + CommonJS + types; ws and eventsource-parser stay dependencies.
    entry: { index: "src/index.ts" },
    format: ["esm", "cjs"],
    platform: "node",
    target: "node20",
    dts: true,
    sourcemap: true,
    clean: true,
  },
  {
    // Browsers: one ESM file with eventsource-parser inside and no ws (native WebSocket).
    entry: { browser: "src/browser.ts" },
    format: ["esm"],
    platform: "browser",
    target: "es2022",
    noExternal: ["eventsource-parser"],
    external: ["ws"],
    sourcemap: true,
  },
]);
