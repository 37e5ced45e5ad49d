package guarantees

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestHangNeverAnswers: a planned timeout ("hang") gets no HTTP answer at
// all, even for a client that waits past the hold (a dispatcher paused
// beyond its attempt timeout reads whatever answer is there when it
// resumes). Before, the handler returned after the hold and net/http sent
// an implicit 200: the dispatcher counted the message delivered while the
// receiver had recorded a timeout and waited for a retry.
func TestHangNeverAnswers(t *testing.T) {
	w := newWHReceiver(t, &run{seed: 1796154357703600257})
	cursor := ""
	for i := 0; i < 1000 && cursor == ""; i++ {
		if c := fmt.Sprintf("2-%d", i); w.plan(c, 1) == hang {
			cursor = c
		}
	}
	if cursor == "" {
		t.Fatal("no cursor with a planned first-attempt timeout")
	}
	cl := w.Client()
	cl.Timeout = attemptTO + 5*time.Second // waits past the hold
	start := time.Now()
	resp, err := cl.Post(w.URL, "application/json", strings.NewReader(`{"cursor":"`+cursor+`"}`))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("a planned timeout answered %d after %v; want no answer", resp.StatusCode, time.Since(start).Round(time.Millisecond))
	}
	if took := time.Since(start); took < attemptTO {
		t.Fatalf("the connection ended after %v, before the attempt timeout (%v): %v", took, attemptTO, err)
	}
	w.mu.Lock()
	got := w.got[cursor]
	w.mu.Unlock()
	if len(got) != 1 || got[0].answer != hang {
		t.Fatalf("recorded %+v; want one attempt answered with a timeout", got)
	}
	// The second attempt of that message is answered (its plan: 200).
	resp, err = cl.Post(w.URL, "application/json", strings.NewReader(`{"cursor":"`+cursor+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("second attempt: %d, want 200", resp.StatusCode)
	}
}
