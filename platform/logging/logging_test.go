package logging

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestLimitRepeats(t *testing.T) {
	var buf bytes.Buffer
	h := LimitRepeats(slog.NewTextHandler(&buf, nil), time.Minute).(*repeatHandler)
	now := time.Unix(1000, 0)
	h.state.now = func() time.Time { return now }
	log := slog.New(h)
	dl := log.With("component", "dispatcher")
	for i := 0; i < 1000; i++ {
		dl.Warn("webhook retries: fetch", "topic", "t", "partition", 0, "err", "UNKNOWN_TOPIC_ID")
	}
	dl.Warn("webhook retries: fetch", "topic", "t", "partition", 1, "err", "UNKNOWN_TOPIC_ID")  // another partition
	log.Warn("webhook retries: fetch", "topic", "t", "partition", 0, "err", "UNKNOWN_TOPIC_ID") // another scope
	for i := 0; i < 5; i++ {
		log.Info("info is never limited")
	}
	if n := strings.Count(buf.String(), "\n"); n != 8 {
		t.Fatalf("%d lines, want 8:\n%s", n, buf.String())
	}
	now = now.Add(time.Minute)
	buf.Reset()
	dl.Warn("webhook retries: fetch", "topic", "t", "partition", 0, "err", "UNKNOWN_TOPIC_ID")
	if !strings.Contains(buf.String(), RepeatedAttr+"=999") {
		t.Fatalf("after the interval: %q, want %s=999", buf.String(), RepeatedAttr)
	}
	if LimitRepeats(h, time.Second) != h {
		t.Fatal("wrapped twice")
	}
}

func TestLimitRepeatsBoundsMemory(t *testing.T) {
	h := LimitRepeats(slog.NewTextHandler(&bytes.Buffer{}, nil), time.Minute).(*repeatHandler)
	log := slog.New(h)
	for i := 0; i < 3*maxKeys; i++ {
		log.Warn("distinct", "i", i)
	}
	if n := len(h.state.seen); n > maxKeys {
		t.Fatalf("%d keys remembered, want at most %d", n, maxKeys)
	}
}
