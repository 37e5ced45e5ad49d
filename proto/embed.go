// Package proto holds MsgMesh's contracts as files and embeds them:
//
//	openapi.yaml                      the HTTP API (OpenAPI 3.0.3)
//	control/v1/events.schema.json     control-log events (JSON Schema 2020-12)
//
// Tests load them from here (see proto/openapitest for the conformance
// checker) and a docs endpoint can serve them as they are.
package proto

import _ "embed"

// OpenAPI is proto/openapi.yaml, the HTTP API contract.
//
//go:embed openapi.yaml
var OpenAPI []byte

// ControlEventsSchema is proto/control/v1/events.schema.json, the JSON
// Schema of one control-log record value (controlstate.Event).
//
//go:embed control/v1/events.schema.json
var ControlEventsSchema []byte
