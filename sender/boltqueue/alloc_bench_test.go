package boltqueue_test

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/boltqueue"
)

// cycleBatch is the envelopes of one cycle: bench/sender.sh's workers.
const cycleBatch = 20

// cycleAllocs is the allocation budget of one envelope's enqueue, lease
// and settlement (delivered) on bbolt, in batches of cycleBatch (bbolt's
// own allocations included: most are its opening of a destination's
// buckets in each transaction, and its nodes on write). Measured: 298.
const cycleAllocs = 310

// cycle enqueues cycleBatch envelopes of a 500-byte payload, leases them,
// makes each a delivered attempt as the sender does, and settles them.
// next numbers the IDs.
func cycle(ctx context.Context, tb testing.TB, q sender.Queue, next *int, payload []byte, now time.Time) {
	for range cycleBatch {
		*next++
		e := &sender.Envelope{ID: "evt_" + strconv.Itoa(*next), Destination: "bench", EventType: "reservation.confirmed", CreatedAt: now, NextAt: now, Payload: payload}
		if _, err := q.Enqueue(ctx, e); err != nil {
			tb.Fatal(err)
		}
	}
	leased, err := q.Lease(ctx, "bench", cycleBatch, now, time.Minute)
	if err != nil || len(leased) != cycleBatch {
		tb.Fatalf("leased %d, %v; want %d", len(leased), err, cycleBatch)
	}
	outcomes := make([]sender.Outcome, 0, cycleBatch)
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

// BenchmarkDeliveryCycle is one envelope's way through the embedded queue
// (without fsync, so that the CPU cost shows), in batches as the sender
// leases and settles them: its enqueue, its lease, and its settlement as
// delivered. It fails when an envelope allocates more than cycleAllocs.
func BenchmarkDeliveryCycle(b *testing.B) {
	db, err := bolt.Open(filepath.Join(b.TempDir(), "state.db"), 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	q, err := boltqueue.New(db, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	payload := []byte(`{"type":"reservation.confirmed","data":"` + strings.Repeat("x", 500-44) + `"}`)
	now := time.Now()
	next := 0
	cycle(ctx, b, q, &next, payload, now)
	if n := testing.AllocsPerRun(20, func() { cycle(ctx, b, q, &next, payload, now) }) / cycleBatch; n > cycleAllocs {
		b.Fatalf("an envelope's enqueue, lease and settlement allocate %.1f times; the budget is %d", n, cycleAllocs)
	}
	b.ReportAllocs()
	for b.Loop() {
		cycle(ctx, b, q, &next, payload, now)
	}
	b.ReportMetric(float64(testing.AllocsPerRun(1, func() { cycle(ctx, b, q, &next, payload, now) }))/cycleBatch, "allocs/envelope")
}
