package realtime

import (
	"context"
	"errors"
	"testing"
	"time"
)

// acquireCatchup waits at most catchupWait (then errCatchupBusy: the
// stream ends resumably), and a connection's own cap holds even when the
// node has free slots.
func TestAcquireCatchupTimedAndPerConnection(t *testing.T) {
	s := &Service{catchups: make(chan struct{}, 2), catchupWait: 100 * time.Millisecond}
	ctx := context.Background()
	conn := make(chan struct{}, 1)
	rel1, err := s.acquireCatchup(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	// The connection's cap (1) is reached; the node has a free slot.
	start := time.Now()
	if _, err := s.acquireCatchup(ctx, conn); !errors.Is(err, errCatchupBusy) {
		t.Fatalf("second catch-up of one connection: %v, want errCatchupBusy", err)
	}
	if d := time.Since(start); d < 90*time.Millisecond || d > 2*time.Second {
		t.Fatalf("waited %v, want about catchupWait", d)
	}
	if len(s.catchups) != 1 || len(conn) != 1 {
		t.Fatalf("a failed acquire kept slots: node %d, connection %d", len(s.catchups), len(conn))
	}
	// Another connection takes the node's last slot; then the node is full.
	rel2, err := s.acquireCatchup(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	other := make(chan struct{}, 1)
	if _, err := s.acquireCatchup(ctx, other); !errors.Is(err, errCatchupBusy) {
		t.Fatalf("acquire on a full node: %v, want errCatchupBusy", err)
	}
	if len(other) != 0 {
		t.Fatal("a failed acquire kept its connection slot")
	}
	// A release lets a waiter in.
	go func() { time.Sleep(20 * time.Millisecond); rel1() }()
	rel3, err := s.acquireCatchup(ctx, conn)
	if err != nil {
		t.Fatalf("acquire after a release: %v", err)
	}
	rel2()
	rel3()
	if len(s.catchups) != 0 || len(conn) != 0 {
		t.Fatalf("slots left after every release: node %d, connection %d", len(s.catchups), len(conn))
	}
	// The request's context ends a wait.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	s.catchups <- struct{}{}
	s.catchups <- struct{}{}
	if _, err := s.acquireCatchup(cctx, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("acquire with an ended context: %v", err)
	}
}
