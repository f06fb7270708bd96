package queuetest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/sender"
)

// CycleBatch is the envelopes of one DeliveryCycle: bench/sender.sh's
// workers.
const CycleBatch = 20

// CyclePayload is a DeliveryCycle envelope's payload: 500 bytes of JSON.
var CyclePayload = []byte(`{"type":"reservation.confirmed","data":"` + strings.Repeat("x", 500-44) + `"}`)

// DeliveryCycle is the way of CycleBatch envelopes through q as the sender
// takes it, for the queues' allocation benchmarks: it enqueues them,
// leases them, makes each a delivered attempt, and settles them. next
// numbers the IDs.
func DeliveryCycle(ctx context.Context, tb testing.TB, q sender.Queue, next *int, now time.Time) {
	for range CycleBatch {
		*next++
		e := &sender.Envelope{ID: "evt_" + strconv.Itoa(*next), Destination: "bench", EventType: "reservation.confirmed", CreatedAt: now, NextAt: now, Payload: CyclePayload}
		if _, err := q.Enqueue(ctx, e); err != nil {
			tb.Fatal(err)
		}
	}
	leased, err := q.Lease(ctx, "bench", CycleBatch, now, time.Minute)
	if err != nil || len(leased) != CycleBatch {
		tb.Fatalf("leased %d, %v; want %d", len(leased), err, CycleBatch)
	}
	outcomes := make([]sender.Outcome, 0, CycleBatch)
	for _, l := range leased {
		e := l.Envelope
		e.Attempts++
		e.Log = append(e.Log, sender.Attempt{At: now, Status: 200, Latency: time.Millisecond})
		e.LastStatus = 200
		outcomes = append(outcomes, sender.Outcome{Kind: sender.Delivered, ID: e.ID, LeaseUntil: l.LeaseUntil, Envelope: e})
	}
	if skipped, err := q.Settle(ctx, "bench", outcomes, now); err != nil || skipped != 0 {
		tb.Fatalf("settle: %d skipped, %v", skipped, err)
	}
}
