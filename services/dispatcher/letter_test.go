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

// Failed consumers restart after a jittered exponential backoff, capped.
func TestRestartBackoff(t *testing.T) {
	var r restart
	now := time.Now()
	var waits []time.Duration
	for i := 0; i < 12; i++ {
		waits = append(waits, r.fail(now))
	}
	if waits[0] < restartMin/2 || waits[0] > restartMin*3/2 {
		t.Fatalf("first wait %v, want about %v", waits[0], restartMin)
	}
	for _, w := range waits {
		if w > restartMax*3/2 {
			t.Fatalf("wait %v over the cap %v (+50%% jitter)", w, restartMax)
		}
	}
	if waits[11] < restartMax/2 {
		t.Fatalf("12th wait %v, want near the cap %v", waits[11], restartMax)
	}
	if r.failures != 12 || !r.until.Equal(now.Add(waits[11])) {
		t.Fatalf("failures %d, until %v", r.failures, r.until)
	}
}
