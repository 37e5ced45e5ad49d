package integration

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"reflect"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	h "github.com/msgmesh/msgmesh/integration/harness"
)

// hv and hb are expected headers: a UTF-8 value, and bytes.
func hv(k, v string) h.Header { return h.Header{Key: k, Value: &v} }
func hb(k string, v []byte) h.Header {
	s := base64.StdEncoding.EncodeToString(v)
	return h.Header{Key: k, ValueBase64: &s}
}

// pollAll polls (acknowledging each batch) until n messages arrived,
// returning them with every raw answer, which must be valid JSON in UTF-8.
func pollAll(t *testing.T, base, key, topic, group string, n int) []h.Msg {
	t.Helper()
	var out []h.Msg
	ack := ""
	deadline := time.Now().Add(30 * time.Second)
	for len(out) < n {
		if time.Now().After(deadline) {
			t.Fatalf("polled %d of %d messages in 30s", len(out), n)
		}
		body := map[string]any{"group": group, "wait_ms": 2000, "ack": ack}
		r := h.Do(t, base, "POST", "/v1/topics/"+topic+"/poll", key, body)
		if r.Status != 200 {
			t.Fatalf("poll: %d %s", r.Status, r.Body)
		}
		if !utf8.Valid(r.Body) || !json.Valid(r.Body) {
			t.Fatalf("poll answer is not valid JSON in UTF-8: %q", r.Body)
		}
		var a h.PollAnswer
		if err := json.Unmarshal(r.Body, &a); err != nil {
			t.Fatal(err)
		}
		out = append(out, a.Messages...)
		if a.Batch != "" {
			ack = a.Batch
		}
	}
	return out
}

// Headers keep order, duplicates and bytes from publish to poll, SSE and
// WebSocket, whether MsgMesh or a Kafka tool (franz-go, kcat) wrote them;
// whatever a Kafka tool wrote, every answer is valid JSON.
func TestDataPathHeadersAndBytesRoundTrip(t *testing.T) {
	const topic = "hdrs"
	c := h.NewCluster(t)
	n := c.Start(t, nil)
	key := c.AdminKey
	tp := h.CreateTopic(t, n.URL, key, topic, 1)

	// 0: the list form, with a duplicate key and bytes.
	h.Must(t, n.URL, "POST", "/v1/topics/"+topic+"/messages", key, []byte(`{"data":{"n":0},"headers":[{"key":"a","value":"1"},{"key":"b","value_base64":"/wA="},{"key":"a","value":"2"}]}`), 200)
	// 1: the object form keeps document order (not sorted).
	h.Must(t, n.URL, "POST", "/v1/topics/"+topic+"/messages", key, []byte(`{"data":1,"headers":{"z":"last?","y":"é","a":"first?"}}`), 200)
	// 2: franz-go writes what no HTTP publish can: a room and a header
	// key that are not UTF-8, duplicates, and "JSON" with invalid UTF-8
	// inside a string under a JSON content type.
	cl := c.KafkaClient(t)
	badJSON := []byte("{\"s\":\"\xff\xfe\"}")
	rec := &kgo.Record{Topic: tp.KafkaTopic, Key: []byte("r\xff"), Value: badJSON, Headers: []kgo.RecordHeader{
		{Key: "content-type", Value: []byte("application/json")},
		{Key: "dup", Value: []byte("x")},
		{Key: "dup", Value: []byte("\x80\x81")},
		{Key: "k\xc3", Value: []byte("v")},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	// 3: kcat with repeated -H.
	h.RunKcat(t, []byte("{\"k\":3}\n"), "-P", "-b", c.Brokers[0], "-t", tp.KafkaTopic, "-H", "t=one", "-H", "t=two", "-H", "u=")

	ms := pollAll(t, n.URL, key, topic, "g-hdrs", 4)
	ct := hv("content-type", "application/json")
	want := [][]h.Header{
		{ct, hv("a", "1"), hb("b", []byte{0xff, 0}), hv("a", "2")},
		{ct, hv("z", "last?"), hv("y", "é"), hv("a", "first?")},
		{ct, hv("dup", "x"), hb("dup", []byte{0x80, 0x81}), hv("k\ufffd", "v")},
		{hv("t", "one"), hv("t", "two"), hv("u", "")},
	}
	for i, m := range ms {
		if !reflect.DeepEqual(m.Headers, want[i]) {
			t.Errorf("message %d headers %s, want %s", i, jsonOf(m.Headers), jsonOf(want[i]))
		}
	}
	if m := ms[2]; m.DataBase64 == nil || *m.DataBase64 != base64.StdEncoding.EncodeToString(badJSON) || m.Data != nil {
		t.Errorf("JSON with invalid UTF-8: data %s data_base64 %v, want data_base64 of the bytes", m.Data, m.DataBase64)
	}
	if m := ms[2]; m.RoomName() != "r\ufffd" {
		t.Errorf("room not UTF-8 shows as %q, want %q", m.RoomName(), "r\ufffd")
	}

	// SSE and WebSocket carry the same shape.
	s := mustSSE(t, n.URL, key, topic, url.Values{"from": {"earliest"}}, "")
	defer s.Close()
	for i := 0; i < 4; {
		ev, ok := s.Next(30 * time.Second)
		if !ok {
			t.Fatalf("SSE: %d of 4 messages", i)
		}
		if ev.Type != "" || ev.Data == "" {
			continue // id-only or control events
		}
		if !json.Valid([]byte(ev.Data)) || !utf8.ValidString(ev.Data) {
			t.Fatalf("SSE data %d is not valid JSON in UTF-8: %q", i, ev.Data)
		}
		m := ev.message(t)
		if !reflect.DeepEqual(m.Headers, want[i]) {
			t.Errorf("SSE message %d headers %s, want %s", i, jsonOf(m.Headers), jsonOf(want[i]))
		}
		i++
	}
	ws := mustWS(t, n.URL, key)
	ws.send(t, map[string]any{"type": "subscribe", "id": "H", "topic": topic, "from": "earliest"})
	for i := range 4 {
		f := ws.await(t, "message", "H", 30*time.Second, nil) // checkFrame validates the schema
		raw, _ := json.Marshal(f["message"])
		var m h.Msg
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(m.Headers, want[i]) {
			t.Errorf("WebSocket message %d headers %s, want %s", i, jsonOf(m.Headers), jsonOf(want[i]))
		}
	}
}

func jsonOf(v any) string { b, _ := json.Marshal(v); return string(b) }

// What a message cannot carry is refused with 400 and nothing is stored:
// a JSON body that is not UTF-8 (in data, room or a header), and headers
// in neither accepted form.
func TestDataPathPublishRefusesWhatCannotBeRepresented(t *testing.T) {
	const topic = "strict"
	c := h.NewCluster(t)
	n := c.Start(t, nil)
	key := c.AdminKey
	h.CreateTopic(t, n.URL, key, topic, 1)
	for name, body := range map[string]string{
		"data with invalid UTF-8":         "{\"data\":\"\xff\"}",
		"data object with invalid UTF-8":  "{\"data\":{\"k\":\"a\xc3(\"}}",
		"batch data with invalid UTF-8":   "{\"messages\":[{\"data\":1},{\"data\":\"\xe2\x82\"}]}",
		"room with invalid UTF-8":         "{\"data\":1,\"room\":\"\xff\"}",
		"header value with invalid UTF-8": "{\"data\":1,\"headers\":{\"k\":\"\xff\"}}",
		"header with value and base64":    `{"data":1,"headers":[{"key":"k","value":"v","value_base64":"dg=="}]}`,
		"header with neither":             `{"data":1,"headers":[{"key":"k"}]}`,
		"header without key":              `{"data":1,"headers":[{"value":"v"}]}`,
		"header with bad base64":          `{"data":1,"headers":[{"key":"k","value_base64":"!!"}]}`,
		"header with an unknown field":    `{"data":1,"headers":[{"key":"k","value":"v","x":1}]}`,
		"header object with a number":     `{"data":1,"headers":{"k":1}}`,
		"headers a string":                `{"data":1,"headers":"k=v"}`,
		"reserved header in the list":     `{"data":1,"headers":[{"key":"Content-Type","value":"text/plain"}]}`,
	} {
		r := h.Do(t, n.URL, "POST", "/v1/topics/"+topic+"/messages", key, []byte(body), "application/json")
		h.WantError(t, name, r, 400, "invalid_request")
	}
	// Nothing was stored: the next good message is the topic's first.
	r := h.Must(t, n.URL, "POST", "/v1/topics/"+topic+"/messages", key, []byte(`{"data":1}`), 200).JSON(t)
	if r["cursor"] != "0-0" {
		t.Errorf("first accepted message at %v, want 0-0: refused publishes stored records", r["cursor"])
	}
}
