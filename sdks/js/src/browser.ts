import { MsgMeshClient } from "./client.js";
import type { MsgMeshOptions } from "./types.js";
import { browserRuntime } from "./ws-browser.js";

export * from "./exports.js";

/** The MsgMesh client (browser build: the native WebSocket). */
export class MsgMesh extends MsgMeshClient {
  constructor(options: MsgMeshOptions) {
    super(options, browserRuntime);
  }
}
