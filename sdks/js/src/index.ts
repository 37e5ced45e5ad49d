import { MsgMeshClient } from "./client.js";
import type { MsgMeshOptions } from "./types.js";
import { nodeRuntime } from "./ws-node.js";

export * from "./exports.js";

/** The MsgMesh client (Node build: WebSocket through the ws package). */
export class MsgMesh extends MsgMeshClient {
  constructor(options: MsgMeshOptions) {
    super(options, nodeRuntime);
  }
}
