package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hookgate/hookgate/sender"
)

// leaseOnly is a queue whose Lease answers what it is told and whose
// Enqueue finds a duplicate: the rest of the interface is never called.
type leaseOnly struct {
	sender.AuditedQueue
	leased []sender.Leased
	err    error
}

func (q leaseOnly) Enqueue(context.Context, *sender.Envelope) (sender.EnqueueResult, error) {
	return sender.EnqueueResult{Duplicate: true}, nil
}

func (q leaseOnly) Lease(context.Context, string, int, time.Time, time.Duration) ([]sender.Leased, error) {
	return q.leased, q.err
}

// TestObservedLease: a lease that leased nothing, like a duplicate
// enqueue, is no verdict on the store's writes (Redis out of memory runs
// it all the same); one that leased something is a write that worked, and
// a failed one a write that failed.
func TestObservedLease(t *testing.T) {
	refused := errors.New("OOM command not allowed")
	for _, tc := range []struct {
		name   string
		q      leaseOnly
		report []error
	}{
		{"empty", leaseOnly{}, nil},
		{"leased", leaseOnly{leased: make([]sender.Leased, 1)}, []error{nil}},
		{"failed", leaseOnly{err: refused}, []error{refused}},
	} {
		var got []error
		q := ObserveWrites(tc.q, func(err error) { got = append(got, err) })
		_, _ = q.Lease(t.Context(), "d", 1, time.Now(), time.Second)
		_, _ = q.Enqueue(t.Context(), &sender.Envelope{}) // a duplicate: no verdict either
		if len(got) != len(tc.report) || (len(got) == 1 && !errors.Is(got[0], tc.report[0])) {
			t.Errorf("%s: reported %v, want %v", tc.name, got, tc.report)
		}
	}
}
