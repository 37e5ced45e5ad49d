package realtime

import (
	"testing"
	"time"
)

// Streams that open together spread their first heartbeat (and credential
// re-check) over the second half of the interval, never later than it.
func TestFirstBeatSpreads(t *testing.T) {
	seen := map[time.Duration]bool{}
	for range 200 {
		d := firstBeat(10 * time.Second)
		if d < 5*time.Second || d >= 10*time.Second {
			t.Fatalf("first beat %v, want in [5s, 10s)", d)
		}
		seen[d.Truncate(500*time.Millisecond)] = true
	}
	if len(seen) < 5 {
		t.Errorf("200 first beats fell in %d half-second slots, want them spread", len(seen))
	}
	for _, every := range []time.Duration{0, 1, 2, 3} {
		if d := firstBeat(every); d < 1 || d > max(every, 1) {
			t.Errorf("firstBeat(%v) = %v", every, d)
		}
	}
}
