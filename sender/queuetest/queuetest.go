// Package queuetest is the conformance suite every sender.Queue backend
// passes: idempotent enqueue, batched leases with expiry and fencing,
// settlement, pause, dead letters with redrive and purge, retention by the
// caller's clock, and one winner under concurrent leases.
package queuetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/hookgate/hookgate/sender"
)

// NewQueue returns a queue for one test, isolated from every other test's
// (its own key prefix or file), keeping delivered IDs and dead letters for
// retention, and cleans it up with t.Cleanup.
type NewQueue func(t *testing.T, retention time.Duration) sender.Queue

var (
	t0        = time.UnixMilli(1_800_000_000_000)
	lease     = 30 * time.Second
	retention = time.Hour
)

func env(dest, id string, at time.Time) *sender.Envelope {
	return &sender.Envelope{
		ID: id, Destination: dest, EventType: "reservation.confirmed", Entity: "r-1",
		EventTime: at.Add(-time.Second), CreatedAt: at, NextAt: at,
		Payload:     []byte(`{"id":"` + id + `","binary":"` + "\x00\xff" + `"}`),
		TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	}
}

func mustEnqueue(t *testing.T, q sender.Queue, e *sender.Envelope, want sender.EnqueueResult) {
	t.Helper()
	got, err := q.Enqueue(t.Context(), e)
	if err != nil {
		t.Fatalf("Enqueue(%s): %v", e.ID, err)
	}
	if got != want {
		t.Fatalf("Enqueue(%s) = %+v, want %+v", e.ID, got, want)
	}
}

func mustLease(t *testing.T, q sender.Queue, dest string, n int, now time.Time) []sender.Leased {
	t.Helper()
	got, err := q.Lease(t.Context(), dest, n, now, lease)
	if err != nil {
		t.Fatalf("Lease: %v", err)
	}
	return got
}

func ids(ls []sender.Leased) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.ID)
	}
	return out
}

func mustSettle(t *testing.T, q sender.Queue, dest string, os []sender.Outcome, now time.Time, wantSkipped int) {
	t.Helper()
	n, err := q.Settle(t.Context(), dest, os, now)
	if err != nil {
		t.Fatalf("Settle: %v", err)
	}
	if n != wantSkipped {
		t.Fatalf("Settle skipped %d, want %d", n, wantSkipped)
	}
}

var queued = sender.EnqueueResult{State: sender.StateQueued}

// deadLetters makes n dead letters l-000.. of dest, each with one failed
// attempt, dead at t0; it answers their IDs.
func deadLetters(t *testing.T, q sender.Queue, dest string, n int) []string {
	t.Helper()
	var all []string
	for i := range n {
		id := fmt.Sprintf("l-%03d", i)
		all = append(all, id)
		mustEnqueue(t, q, env(dest, id, t0), queued)
	}
	l := mustLease(t, q, dest, n, t0)
	var os []sender.Outcome
	for _, x := range l {
		e := *x.Envelope
		e.Attempts, e.DeadAt, e.LastStatus, e.Class = 1, t0, 400, sender.ClassHTTP4xx
		e.Log = []sender.Attempt{{At: t0, Status: 400, Error: "Bad Request"}}
		os = append(os, sender.Outcome{Kind: sender.Dead, ID: e.ID, LeaseUntil: x.LeaseUntil, Envelope: &e})
	}
	mustSettle(t, q, dest, os, t0, 0)
	return all
}

// Run runs the suite.
func Run(t *testing.T, newQueue NewQueue) {
	runOperations(t, newQueue)
	runFanout(t, newQueue)
	runHistory(t, newQueue)
	runMove(t, newQueue)
	runHistoryQuiet(t, newQueue)
	runLease(t, newQueue)
	runDead(t, newQueue)
	runReceived(t, newQueue)
	runPending(t, newQueue)
	runOrdering(t, newQueue)
}
