package gateway

import (
	"bytes"

	"github.com/gin-gonic/gin"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/httpapi"
	"github.com/msgmesh/msgmesh/platform/message"
)

// ContentTypeNDJSON is the batch framing without an envelope
// (proto/openapi.yaml, publish): newline-delimited JSON, each line the
// "data" of one message, all in the room of ?room= (or none).
const ContentTypeNDJSON = "application/x-ndjson"

// parseNDJSON turns an NDJSON body into records, one per line in order.
// Each line is one JSON text, checked as strictly as a JSON body's "data"
// (message.ValidJSON: RFC 8259 in valid UTF-8) and stored without its
// surrounding whitespace; lines end with LF (CRLF is accepted) and the last
// one's LF is optional. An empty line, an invalid line or one over a limit
// refuses the whole request, naming the line (1-based): nothing is
// published. Records share the body's bytes: no copy per message.
func (g *Gateway) parseNDJSON(c *gin.Context, body []byte) ([]*kgo.Record, error) {
	var key []byte
	if q, has := c.GetQuery("room"); has {
		if err := g.checkRoom(q, -1); err != nil {
			return nil, err
		}
		key = []byte(q)
	}
	if len(body) == 0 {
		return nil, httpapi.Errorf(httpapi.CodeInvalidRequest, "empty body: an NDJSON publish carries one JSON value per line")
	}
	if bytes.HasSuffix(body, []byte("\n")) {
		body = body[:len(body)-1]
	}
	n := bytes.Count(body, []byte("\n")) + 1
	if n > g.cfg.Publish.MaxBatchMessages {
		return nil, httpapi.Errorf(httpapi.CodePayloadTooLarge, "batch of %d lines is over the limit of %d messages", n, g.cfg.Publish.MaxBatchMessages)
	}
	recs := make([]*kgo.Record, n)
	backing := make([]kgo.Record, n)
	hdrs := make([]kgo.RecordHeader, n)
	for i := range n {
		line := body
		if j := bytes.IndexByte(body, '\n'); j >= 0 {
			line, body = body[:j], body[j+1:]
		}
		line = bytes.Trim(line, " \t\r") // JSON whitespace, with the CR of CRLF
		switch {
		case len(line) == 0:
			return nil, httpapi.Errorf(httpapi.CodeInvalidRequest, "line %d is empty: an NDJSON publish carries one JSON value per line", i+1)
		case len(line) > g.cfg.Publish.MaxMessageBytes:
			return nil, httpapi.Errorf(httpapi.CodePayloadTooLarge, "line %d: message of %d bytes is over the %d byte limit", i+1, len(line), g.cfg.Publish.MaxMessageBytes)
		case !message.ValidJSON(line):
			return nil, httpapi.Errorf(httpapi.CodeInvalidRequest, "line %d is not one valid JSON value in UTF-8 (RFC 8259; NDJSON has no newline inside a value)", i+1)
		}
		hdrs[i] = kgo.RecordHeader{Key: HeaderContentType, Value: contentTypeJSON}
		r := &backing[i]
		r.Key, r.Value, r.Headers = key, line, hdrs[i:i+1:i+1] // capped: appending a header copies
		recs[i] = r
	}
	return recs, nil
}
