import type { MsgMeshError } from "./errors.js";

export interface WsHandlers {
  onOpen(): void;
  onMessage(text: string): void;
  /** Called once; error when the handshake was refused (status, code, requestId when known). */
  onClose(code: number, reason: string, error?: MsgMeshError): void;
}

export interface WsConn {
  send(text: string): void;
  close(code?: number, reason?: string): void;
}

/** What differs between Node (ws, headers) and browsers (native WebSocket, ?token=). */
export interface Runtime {
  /** Whether a WebSocket can carry the credential in a header (Node) or only in the URL (browsers). */
  readonly headerAuth: boolean;
  openWebSocket(url: string, credential: string, handlers: WsHandlers): WsConn;
}
