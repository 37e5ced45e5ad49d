// Package ws holds the JSON Schema of MsgMesh's WebSocket frames
// (GET /v1/ws): frames.schema.json, embedded as FramesSchema.
package ws

import _ "embed"

// FramesSchema is proto/ws/frames.schema.json (JSON Schema 2020-12): one
// frame, client or server, told apart by "type".
//
//go:embed frames.schema.json
var FramesSchema []byte
