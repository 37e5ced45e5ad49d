package dispatcher

import (
	"testing"
	"time"
)

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
