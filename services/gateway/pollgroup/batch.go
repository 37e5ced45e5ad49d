package pollgroup

import (
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Batch is the answer to one Poll. Exactly one of Delivered or Undelivered
// must be called once the response has been written (or failed); further
// calls are no-ops, and both are no-ops on an empty batch.
//
// Until it is resolved a non-empty batch holds its member: the member's next
// Poll or Commit waits for it and the member does not expire. A batch left
// unresolved for Config.IdleTimeout is treated as Undelivered.
type Batch struct {
	// ID names the batch for its acknowledgement (Request.Ack): a random
	// prefix of the member and a sequence number. A batch handed out again
	// keeps its ID. Empty when Records is.
	ID string

	// Records are at most Request.Max records of the member's topic, in
	// Kafka order within each partition, with no offset twice. Nil when
	// Wait passed without records. Callers must not modify them.
	Records []*kgo.Record

	m    *member
	gens map[int32]uint64 // partition ownership generation when taken
	ack  *ackCommit       // the commit of Request.Ack, running while the caller writes
	done atomic.Bool
}

// Acknowledged waits until the acknowledgement the poll carried
// (Request.Ack) is committed to Kafka; nil at once when there was none. The
// commit runs while the caller prepares the answer, and the answer must
// not be sent before Acknowledged returned nil: an answer then also means
// "your acknowledgement is committed", as after a synchronous commit.
//
// On an error (a wrapped Kafka commit error) the batch is taken back
// unseen and resolved: the acknowledged batch is outstanding again, these
// records come after it, and the caller answers with the error (the
// client polls again with the same ack). Do not call Delivered or
// Undelivered then.
func (b *Batch) Acknowledged() error {
	if b == nil || b.ack == nil {
		return nil
	}
	a := b.ack
	err := a.wait()
	if err != nil && b.done.CompareAndSwap(false, true) {
		a.failed(b)
		b.m.resolve(b, false)
	}
	return err
}

// Delivered reports that the response was written (after Acknowledged
// returned nil; called without it, it first waits for the acknowledgement's
// commit too). The batch stays
// outstanding: the member's next Poll with Ack set to its ID, or a Commit
// of its cursors, commits it to Kafka; a Poll without that Ack gets it
// again. If the member expires, closes or loses the partitions first, its
// records are delivered again (at-least-once).
func (b *Batch) Delivered() { b.resolve(true) }

// Undelivered reports that the response could not be written. The batch
// stays outstanding as after Delivered (only the delivered metric differs):
// the client never saw its ID, so its next Poll gets it again, unless the
// partitions were revoked meanwhile, in which case the new owner reads them
// from the committed offset. Nothing is skipped.
func (b *Batch) Undelivered() { b.resolve(false) }

func (b *Batch) resolve(delivered bool) {
	if b == nil || b.m == nil || !b.done.CompareAndSwap(false, true) {
		return
	}
	if b.ack != nil && b.ack.wait() != nil {
		// Resolved without Acknowledged, and the acknowledgement failed:
		// it is outstanding again, and these records come after it (again,
		// if they were delivered: at-least-once).
		b.ack.failed(b)
	}
	b.m.resolve(b, delivered)
}
