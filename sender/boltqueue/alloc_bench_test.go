package boltqueue_test

import (
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/internal/bolttest"
	"github.com/hookgate/hookgate/sender/boltqueue"
	"github.com/hookgate/hookgate/sender/queuetest"
)

// cycleAllocs is the allocation budget of one envelope's enqueue, lease
// and settlement (delivered) on bbolt, in batches of queuetest.CycleBatch (bbolt's
// own allocations included: most are its opening of a destination's
// buckets in each transaction, and its nodes on write). Measured: 298.
const cycleAllocs = 310

// BenchmarkDeliveryCycle is one envelope's way through the embedded queue
// (without fsync, so that the CPU cost shows), in batches as the sender
// leases and settles them: its enqueue, its lease, and its settlement as
// delivered. It fails when an envelope allocates more than cycleAllocs.
func BenchmarkDeliveryCycle(b *testing.B) {
	db := bolttest.Open(b, &bolt.Options{NoSync: true})
	q, err := boltqueue.New(db, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	now := time.Now()
	next := 0
	queuetest.DeliveryCycle(ctx, b, q, &next, now)
	if n := testing.AllocsPerRun(20, func() { queuetest.DeliveryCycle(ctx, b, q, &next, now) }) / queuetest.CycleBatch; n > cycleAllocs {
		b.Fatalf("an envelope's enqueue, lease and settlement allocate %.1f times; the budget is %d", n, cycleAllocs)
	}
	b.ReportAllocs()
	for b.Loop() {
		queuetest.DeliveryCycle(ctx, b, q, &next, now)
	}
	b.ReportMetric(float64(testing.AllocsPerRun(1, func() { queuetest.DeliveryCycle(ctx, b, q, &next, now) }))/queuetest.CycleBatch, "allocs/envelope")
}
