import WebSocket from "ws";
import { ServerError, errorFromAnswer, type MsgMeshError } from "./errors.js";
import type { Runtime } from "./runtime.js";

/** Node: the ws package, credential in the Authorization header. */
export const nodeRuntime: Runtime = {
  headerAuth: true,
  openWebSocket(url, credential, h) {
    let finished = false;
    let opened = false;
    let lastErr: MsgMeshError | undefined;
    const finish = (code: number, reason: string, err?: MsgMeshError) => {
      if (finished) return;
      finished = true;
      h.onClose(code, reason, err);
    };
    const ws = new WebSocket(url, {
      headers: { Authorization: `Bearer ${credential}` },
      handshakeTimeout: 10_000,
      maxPayload: 32 << 20,
    });
    ws.on("open", () => {
      opened = true;
      if (!finished) h.onOpen();
    });
    ws.on("message", (data, isBinary) => {
      if (finished || isBinary) return;
      h.onMessage(Array.isArray(data) ? Buffer.concat(data).toString("utf8") : Buffer.from(data as ArrayBuffer).toString("utf8"));
    });
    ws.on("unexpected-response", (req, res) => {
      const chunks: Buffer[] = [];
      const done = () => {
        const headers = { get: (n: string) => { const v = res.headers[n.toLowerCase()]; return v === undefined ? null : Array.isArray(v) ? v.join(", ") : v; } };
        finish(1006, "", errorFromAnswer(res.statusCode ?? 0, headers, Buffer.concat(chunks).toString("utf8"), "GET /v1/ws (upgrade)"));
        req.destroy();
        ws.terminate();
      };
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", done);
      res.on("error", done);
    });
    ws.on("error", (err) => {
      lastErr = new ServerError(`WebSocket: ${err.message}`, { code: "network_error", cause: err });
    });
    ws.on("close", (code, reason) => {
      finish(code, reason.toString("utf8"), opened ? undefined : lastErr ?? new ServerError("WebSocket closed before it opened", { code: "network_error" }));
    });
    return {
      send(text) {
        if (ws.readyState === WebSocket.OPEN) ws.send(text);
      },
      close(code = 1000, reason = "") {
        finished = true;
        if (ws.readyState === WebSocket.CONNECTING) ws.terminate();
        else if (ws.readyState === WebSocket.OPEN) ws.close(code, reason);
      },
    };
  },
};
