package integration

import (
	"strings"
	"testing"

	h "github.com/msgmesh/msgmesh/integration/harness"
	"github.com/msgmesh/msgmesh/platform/config"
)

// An NDJSON publish (Content-Type: application/x-ndjson) stores one message
// per line, in line order, in the room of ?room=, each exactly like the
// same value published as JSON "data": poll shows it as "data" with the
// content-type application/json header.
func TestPublishNDJSON(t *testing.T) {
	const topic = "ndjson"
	c := h.NewCluster(t)
	n := c.Start(t, nil)
	key := c.AdminKey
	h.CreateTopic(t, n.URL, key, topic, 1)
	path := "/v1/topics/" + topic + "/messages"

	// LF and CRLF line ends, surrounding blanks, a last line without LF.
	body := "{\"n\":0,\"s\":\"é\"}\n  [1, 2]  \r\n\"three\"\nnull"
	r := publishNDJSON(t, n.URL, key, path+"?room=r1", body)
	cs, _ := r["cursors"].([]any)
	if len(cs) != 4 || cs[0] != "0-0" || cs[3] != "0-3" {
		t.Fatalf("cursors %v, want 0-0..0-3 in line order", r["cursors"])
	}
	// Without a room, with a final LF.
	publishNDJSON(t, n.URL, key, path, "{\"n\":4}\n")

	ms := pollAll(t, n.URL, key, topic, "g-ndjson", 5)
	wantData := []string{`{"n":0,"s":"é"}`, `[1, 2]`, `"three"`, `null`, `{"n":4}`}
	for i, m := range ms {
		if string(m.Data) != wantData[i] {
			t.Errorf("message %d data %s, want %s", i, m.Data, wantData[i])
		}
		wantRoom := "r1"
		if i == 4 {
			wantRoom = ""
		}
		if m.RoomName() != wantRoom {
			t.Errorf("message %d room %q, want %q", i, m.RoomName(), wantRoom)
		}
		if len(m.Headers) != 1 || m.Headers[0].Key != "content-type" || m.Headers[0].Value == nil || *m.Headers[0].Value != "application/json" {
			t.Errorf("message %d headers %s, want only content-type application/json", i, jsonOf(m.Headers))
		}
	}
}

// A bad NDJSON body is refused whole with a clear {"error","code"} naming
// the line, and nothing of it reaches Kafka.
func TestPublishNDJSONRefusesBadInput(t *testing.T) {
	const topic = "ndjsonbad"
	c := h.NewCluster(t)
	n := c.Start(t, func(cfg *config.Config) {
		cfg.Publish.MaxBatchMessages = 3
		cfg.Publish.MaxMessageBytes = 64
		cfg.Publish.MaxRoomLength = 8
	})
	key := c.AdminKey
	h.CreateTopic(t, n.URL, key, topic, 1)
	path := "/v1/topics/" + topic + "/messages"
	for _, tc := range []struct {
		name, query, body string
		status            int
		code, mention     string
	}{
		{"invalid JSON on line 2", "", "1\n{\"a\":\n3", 400, "invalid_request", "line 2"},
		{"two values on one line", "", "1\n2 3", 400, "invalid_request", "line 2"},
		{"invalid UTF-8", "", "1\n\"\xff\"", 400, "invalid_request", "UTF-8"},
		{"a raw control character in a string", "", "\"a\x01\"", 400, "invalid_request", "line 1"},
		{"an empty line", "", "1\n\n2", 400, "invalid_request", "line 2 is empty"},
		{"an empty body", "", "", 400, "invalid_request", "empty body"},
		{"only a newline", "", "\n", 400, "invalid_request", "line 1 is empty"},
		{"too many lines", "", "1\n2\n3\n4", 413, "payload_too_large", "limit of 3"},
		{"a line over the byte limit", "", "1\n\"" + strings.Repeat("x", 70) + "\"", 413, "payload_too_large", "line 2"},
		{"an empty room", "?room=", "1", 400, "invalid_request", "room"},
		{"a room over the limit", "?room=" + strings.Repeat("r", 9), "1", 400, "invalid_request", "room"},
	} {
		r := h.Do(t, n.URL, "POST", path+tc.query, key, tc.body, "application/x-ndjson")
		e := h.WantError(t, tc.name, r, tc.status, tc.code)
		if msg, _ := e["error"].(string); !strings.Contains(msg, tc.mention) {
			t.Errorf("%s: error %q does not mention %q", tc.name, msg, tc.mention)
		}
	}
	// Nothing was stored: the next good message is the topic's first.
	r := publishNDJSON(t, n.URL, key, path, "1")
	if cs, _ := r["cursors"].([]any); len(cs) != 1 || cs[0] != "0-0" {
		t.Errorf("first accepted message at %v, want [0-0]: refused publishes stored records", r["cursors"])
	}
}

func publishNDJSON(t *testing.T, base, key, path, body string) map[string]any {
	t.Helper()
	r := h.Do(t, base, "POST", path, key, body, "application/x-ndjson")
	if r.Status != 200 {
		t.Fatalf("NDJSON publish: status %d, want 200: %s", r.Status, r.Body)
	}
	return r.JSON(t)
}
