import { ServerError } from "./errors.js";
import type { Runtime } from "./runtime.js";

/** Browsers: the native WebSocket, which cannot set headers: the token goes as ?token=. */
export const browserRuntime: Runtime = {
  headerAuth: false,
  openWebSocket(url, credential, h) {
    const u = new URL(url);
    u.searchParams.set("token", credential);
    let finished = false;
    let opened = false;
    const ws = new WebSocket(u.toString());
    ws.onopen = () => {
      opened = true;
      if (!finished) h.onOpen();
    };
    ws.onmessage = (e) => {
      if (!finished && typeof e.data === "string") h.onMessage(e.data);
    };
    ws.onclose = (e) => {
      if (finished) return;
      finished = true;
      h.onClose(
        e.code,
        e.reason,
        opened ? undefined : new ServerError("WebSocket handshake failed (browsers do not expose why)", { code: "network_error" }),
      );
    };
    return {
      send(text) {
        if (ws.readyState === WebSocket.OPEN) ws.send(text);
      },
      close(code = 1000, reason = "") {
        finished = true;
        ws.onopen = ws.onmessage = ws.onclose = null;
        if (ws.readyState === WebSocket.CONNECTING || ws.readyState === WebSocket.OPEN) ws.close(code, reason);
      },
    };
  },
};
