package dispatcher

import (
	"testing"
	"time"
)

// A letter's POST count survives its record; records of earlier versions
// (no count) fall back on the attempt number.
func TestLetterPostsRoundTrip(t *testing.T) {
	l := letter{Webhook: "wh_1", Topic: "orders", MessageID: "msg_x_0-1", Cursor: "0-1", PublishedAt: time.Now(), Attempt: 3, Posts: 3}
	got, err := parseLetter(l.record("t"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Posts != 3 || got.posts() != 3 || got.postsMade() != 3 {
		t.Fatalf("posts %d/%d/%d, want 3", got.Posts, got.posts(), got.postsMade())
	}
	old := l
	old.Posts = 0
	got, err = parseLetter(old.record("t"))
	if err != nil {
		t.Fatal(err)
	}
	if got.posts() != 2 || got.postsMade() != 3 {
		t.Fatalf("without a count: posts before %d (want 2), made %d (want 3)", got.posts(), got.postsMade())
	}
	if first := (letter{Attempt: 1}); first.posts() != 0 {
		t.Fatalf("a first attempt has %d POSTs before it", first.posts())
	}
}
