package store

import (
	"context"
	"time"

	"github.com/hookgate/hookgate/sender"
)

// WriteDone records what a write to the store that does not go through l
// did: the sender's queue's (ObserveWrites). Ready judges by the latest
// write, the handlers' and these alike, so an instance that only sends is
// not ready while its queue's writes fail.
func (l *Lazy) WriteDone(err error) { l.writes.done(err) }

// ObserveWrites returns q, its writes on the sender's hot path (Enqueue,
// Lease when it moves leases, and Settle) reporting their outcome to done
// (Lazy.WriteDone). The rest, an operator's commands, report nothing.
func ObserveWrites(q sender.AuditedQueue, done func(error)) sender.AuditedQueue {
	return observedQueue{q, done}
}

// observedQueue is a queue whose hot-path writes report to done.
type observedQueue struct {
	sender.AuditedQueue
	done func(error)
}

// Enqueue reports a failure, and a success unless it was a duplicate,
// which wrote nothing (see Lease).
func (q observedQueue) Enqueue(ctx context.Context, e *sender.Envelope) (sender.EnqueueResult, error) {
	res, err := q.AuditedQueue.Enqueue(ctx, e)
	if err != nil || !res.Duplicate {
		q.done(err)
	}
	return res, err
}

// Lease reports a failure, and a success only when it leased something:
// an empty lease wrote nothing, and Redis out of memory under noeviction
// runs it all the same, so the worker's idle polls would otherwise mark
// the store ready again a second after an enqueue was refused. Ready's
// own probe write is what finds a recovered store.
func (q observedQueue) Lease(ctx context.Context, dest string, n int, now time.Time, lease time.Duration) ([]sender.Leased, error) {
	leased, err := q.AuditedQueue.Lease(ctx, dest, n, now, lease)
	if err != nil || len(leased) > 0 {
		q.done(err)
	}
	return leased, err
}

func (q observedQueue) Settle(ctx context.Context, dest string, outcomes []sender.Outcome, now time.Time) (int, error) {
	skipped, err := q.AuditedQueue.Settle(ctx, dest, outcomes, now)
	q.done(err)
	return skipped, err
}
