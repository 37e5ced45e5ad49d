package pollgroup

import (
	"context"
	"sync"
)

// opLock serializes the operations on one member's client (Poll, Commit,
// close). It differs from a mutex in two ways: acquiring respects a context,
// and an urgent acquirer (Commit, close) interrupts a Poll parked in its
// long-poll wait and goes ahead of non-urgent waiters (other Polls), so an
// acknowledgement never waits out somebody's long-poll.
type opLock struct {
	mu        sync.Mutex
	held      bool
	urgent    int                // urgent acquirers waiting
	wake      chan struct{}      // closed and replaced whenever the state changes
	interrupt context.CancelFunc // cancels the holder's long-poll wait; nil when not parked
}

func newOpLock() *opLock { return &opLock{wake: make(chan struct{})} }

// broadcastLocked wakes every waiter. l.mu must be held.
func (l *opLock) broadcastLocked() {
	close(l.wake)
	l.wake = make(chan struct{})
}

// lock acquires l, or returns ctx.Err() if ctx ends first. An urgent caller
// interrupts a parked holder and is served before non-urgent waiters.
func (l *opLock) lock(ctx context.Context, urgent bool) error {
	l.mu.Lock()
	if urgent {
		l.urgent++
		if l.interrupt != nil {
			l.interrupt()
		}
	}
	for {
		if !l.held && (urgent || l.urgent == 0) {
			l.held = true
			if urgent {
				l.urgent--
			}
			l.mu.Unlock()
			return nil
		}
		wake := l.wake
		l.mu.Unlock()
		select {
		case <-wake:
			l.mu.Lock()
		case <-ctx.Done():
			l.mu.Lock()
			if urgent {
				l.urgent--
				l.broadcastLocked() // non-urgent waiters may now go
			}
			l.mu.Unlock()
			return ctx.Err()
		}
	}
}

// unlock releases l. The caller must hold it.
func (l *opLock) unlock() {
	l.mu.Lock()
	l.held = false
	l.interrupt = nil
	l.broadcastLocked()
	l.mu.Unlock()
}

// park registers cancel as the way to interrupt the holder's wait. It
// returns false, and registers nothing, when an urgent acquirer is already
// waiting: the holder should then not wait at all.
func (l *opLock) park(cancel context.CancelFunc) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.urgent > 0 {
		return false
	}
	l.interrupt = cancel
	return true
}

// unpark undoes park.
func (l *opLock) unpark() {
	l.mu.Lock()
	l.interrupt = nil
	l.mu.Unlock()
}

// yieldWanted reports whether an urgent acquirer is waiting.
func (l *opLock) yieldWanted() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.urgent > 0
}
