package webhookstore

import (
	"testing"
	"time"
)

// A letter's POST count survives its record; records of earlier versions
// (no count) fall back on the attempt number.
func TestLetterPostsRoundTrip(t *testing.T) {
	l := Letter{Webhook: "wh_1", Topic: "orders", MessageID: "msg_x_0-1", Cursor: "0-1", PublishedAt: time.Now(), Attempt: 3, Posts: 3}
	got, err := ParseLetter(l.Record("t"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Posts != 3 || got.PostsBefore() != 3 || got.PostsMade() != 3 {
		t.Fatalf("posts %d/%d/%d, want 3", got.Posts, got.PostsBefore(), got.PostsMade())
	}
	old := l
	old.Posts = 0
	got, err = ParseLetter(old.Record("t"))
	if err != nil {
		t.Fatal(err)
	}
	if got.PostsBefore() != 2 || got.PostsMade() != 3 {
		t.Fatalf("without a count: posts before %d (want 2), made %d (want 3)", got.PostsBefore(), got.PostsMade())
	}
	if first := (Letter{Attempt: 1}); first.PostsBefore() != 0 {
		t.Fatalf("a first attempt has %d POSTs before it", first.PostsBefore())
	}
}
