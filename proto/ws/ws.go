// Package ws holds the JSON Schema of MsgMesh's WebSocket frames
// (GET /v1/ws): frames.schema.json, embedded as FramesSchema.
package ws

import _ "embed"

// FramesSchema is proto/ws/frames.schema.json (JSON Schema 2020-12): one
// frame, client or server, told apart by "type".
//
//go:embed frames.schema.json
var FramesSchema []byte

// TypeClosed is the type of the frame the server sends before it ends a
// subscription (with its "id" and "topic") or the connection (without
// them) on purpose: {"type": "closed", "reason": "...", "error": "..."}.
const TypeClosed = "closed"

// Reasons of closed frames (and of SSE msgmesh-closed events). Other
// reasons (credential_revoked, tenant_suspended, invalid_token: error
// codes of the credential re-check) may appear; clients treat an unknown
// reason as "reconnect with backoff".
const (
	ReasonTopicDeleted = "topic_deleted" // terminal: the topic is gone
	ReasonShutdown     = "shutdown"      // reconnect (any node) from the positions
	ReasonTokenExpired = "token_expired" // reconnect with a fresh token
	ReasonForbidden    = "forbidden"     // the refreshed credential may not subscribe
	ReasonCatchupBusy  = "catchup_busy"  // resubscribe from the position, with backoff
	ReasonError        = "error"         // resubscribe from the position
	ReasonInvalidFrame = "invalid_frame" // a frame was not JSON text
)

// WebSocket close codes of GET /v1/ws.
const (
	CloseNormal       = 1000 // the client closed, or an unsubscribe-all
	CloseShutdown     = 1001 // closed reason shutdown
	CloseBadFrame     = 4000 // closed reason invalid_frame
	CloseAuthExpired  = 4001 // closed reason token_expired
	CloseAuthRevoked  = 4003 // closed reason credential_revoked, tenant_suspended, invalid_token
	CloseSlowConsumer = 4008 // no closed frame: the client did not read
)
