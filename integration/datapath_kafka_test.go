package integration

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"testing"
	"time"

	h "github.com/msgmesh/msgmesh/integration/harness"
)

// An SRE with kcat sees clean data: records published over HTTP read as
// room:payload, and records kcat produces are polled over HTTP with the key
// as room and the value as data (JSON) or data_base64 (anything else).
func TestDataPathKcatInterop(t *testing.T) {
	h.Kcat(t) // skip (or fail in CI) before booting anything
	const topic = "kcat"
	c := h.NewCluster(t)
	n := c.Start(t, nil)
	key := c.AdminKey
	tp := h.CreateTopic(t, n.URL, key, topic, 1)
	if want := c.KafkaTopic(topic); tp.KafkaTopic != want {
		t.Fatalf("kafka_topic %q, want %q", tp.KafkaTopic, want)
	}

	// HTTP → kcat
	h.Must(t, n.URL, "POST", "/v1/topics/"+topic+"/messages", key, map[string]any{"room": "r1", "data": map[string]any{"a": 1}}, 200)
	if r := h.Do(t, n.URL, "POST", "/v1/topics/"+topic+"/messages?room=r2", key, []byte("hello world"), "text/plain"); r.Status != 200 {
		t.Fatalf("raw publish: %d %s", r.Status, r.Body)
	}
	out := h.RunKcat(t, nil, "-C", "-b", c.Brokers[0], "-t", tp.KafkaTopic, "-K:", "-e", "-q")
	if want := "r1:{\"a\":1}\nr2:hello world\n"; string(out) != want {
		t.Fatalf("kcat -C printed %q, want %q", out, want)
	}

	// kcat → HTTP
	h.RunKcat(t, []byte("r9:{\"x\":1}\nr9:plain text\n"), "-P", "-b", c.Brokers[0], "-t", tp.KafkaTopic, "-K:")
	var ms []h.Msg
	deadline := time.Now().Add(30 * time.Second)
	for len(ms) < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("polled %d of 4 messages in 30s: %v", len(ms), h.Cursors(ms))
		}
		ms = append(ms, h.Poll(t, n.URL, key, topic, h.PollReq{Group: "g-kcat", Consumer: "c1", WaitMs: 5000})...)
	}
	if len(ms) != 4 {
		t.Fatalf("polled %d messages, want 4: %v", len(ms), h.Cursors(ms))
	}
	type view struct{ cursor, room, data, b64 string }
	var got []view
	for _, m := range ms {
		v := view{cursor: m.Cursor, room: m.RoomName(), data: string(m.Data)}
		if m.DataBase64 != nil {
			v.b64 = *m.DataBase64
		}
		got = append(got, v)
	}
	want := []view{
		{"0-0", "r1", `{"a":1}`, ""},
		{"0-1", "r2", "", base64.StdEncoding.EncodeToString([]byte("hello world"))},
		{"0-2", "r9", `{"x":1}`, ""},
		{"0-3", "r9", "", base64.StdEncoding.EncodeToString([]byte("plain text"))},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("polled\n %+v\nwant\n %+v", got, want)
	}
	if ct := ms[1].Header("content-type"); ct != "text/plain" {
		t.Errorf("raw publish's content-type header %q, want text/plain", ct)
	}
}

// A poll group is a real Kafka consumer group: kadm reports the offsets
// the HTTP consumer acknowledged and the lag that remains.
func TestDataPathGroupLagInKadm(t *testing.T) {
	const (
		topic, group = "lag", "g-lag"
		total        = 60
	)
	c := h.NewCluster(t)
	n := c.Start(t, nil)
	key := c.AdminKey
	h.CreateTopic(t, n.URL, key, topic, 3)
	var msgs []map[string]any
	for i := range total {
		msgs = append(msgs, map[string]any{"room": fmt.Sprintf("room-%d", i%12), "data": i})
	}
	ans := h.Must(t, n.URL, "POST", "/v1/topics/"+topic+"/messages", key, map[string]any{"messages": msgs}, 200).JSON(t)
	if cs, _ := ans["cursors"].([]any); len(cs) != total {
		t.Fatalf("publish answered %v", ans)
	}

	req := h.PollReq{Group: group, Consumer: "c1", Max: 10, WaitMs: 10000}
	b1 := pollUntil(t, n.URL, key, topic, req) // acknowledged by the next poll
	b2 := pollUntil(t, n.URL, key, topic, req) // acknowledged by /commit
	h.Commit(t, n.URL, key, topic, group, "c1", h.Cursors(b2))

	acked := append(slices.Clone(b1), b2...)
	wantCommit := map[int32]int64{} // partition → highest acknowledged offset + 1
	for _, m := range acked {
		p := m.Pos(t)
		if p.Offset+1 > wantCommit[p.Partition] {
			wantCommit[p.Partition] = p.Offset + 1
		}
	}

	adm := c.Admin(t)
	kgroup := c.KafkaGroup(topic, group)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lags, err := adm.Lag(ctx, kgroup)
	if err != nil {
		t.Fatalf("kadm Lag: %v", err)
	}
	gl, ok := lags[kgroup]
	if !ok {
		t.Fatalf("kadm Lag knows no group %s: %+v", kgroup, lags)
	}
	if err := gl.Error(); err != nil {
		t.Fatalf("kadm Lag of %s: %v", kgroup, err)
	}
	var sum int64
	for _, l := range gl.Lag.Sorted() {
		if l.Topic != c.KafkaTopic(topic) {
			t.Errorf("lag reported for topic %s", l.Topic)
			continue
		}
		if l.Err != nil {
			t.Errorf("partition %d: %v", l.Partition, l.Err)
		}
		want, has := wantCommit[l.Partition]
		if !has {
			want = -1 // never acknowledged: no commit
		}
		if l.Commit.At != want {
			t.Errorf("partition %d: committed offset %d, want %d (acknowledged cursors %v)", l.Partition, l.Commit.At, want, h.Cursors(acked))
		}
		sum += l.Lag
	}
	if want := int64(total - len(acked)); sum != want || gl.Lag.Total() != want {
		t.Errorf("kadm lag %d (Total %d), want %d = %d published - %d acknowledged", sum, gl.Lag.Total(), want, total, len(acked))
	}
	if len(gl.Lag.Sorted()) != 3 {
		t.Errorf("lag for %d partitions, want 3: %+v", len(gl.Lag.Sorted()), gl.Lag)
	}
}
