package redisqueue_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/internal/redistest"
	"github.com/hookgate/hookgate/sender/queuetest"
	"github.com/hookgate/hookgate/sender/redisqueue"
)

// cycleAllocs is the allocation budget of one envelope's enqueue, lease
// and settlement (delivered) on Redis, in batches of queuetest.CycleBatch (go-redis's
// own allocations included).
const cycleAllocs = 65

// BenchmarkDeliveryCycle is one envelope's way through the queue on a real
// Redis, in batches as the sender leases and settles them: its enqueue,
// its lease, and its settlement as delivered (the attempt itself is
// sender's BenchmarkAttempt). It reports allocations and redis-server's CPU
// time per envelope, and fails when an envelope allocates more than
// cycleAllocs.
func BenchmarkDeliveryCycle(b *testing.B) {
	srv := redistest.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	b.Cleanup(func() { _ = rdb.Close() })
	q := redisqueue.New(rdb, redistest.Prefix("test"), time.Hour)
	ctx := b.Context()
	now := time.Now()
	next := 0
	queuetest.DeliveryCycle(ctx, b, q, &next, now) // scripts loaded
	if n := testing.AllocsPerRun(20, func() { queuetest.DeliveryCycle(ctx, b, q, &next, now) }) / queuetest.CycleBatch; n > cycleAllocs {
		b.Fatalf("an envelope's enqueue, lease and settlement allocate %.1f times; the budget is %d", n, cycleAllocs)
	}
	cpu0 := redisCPU(ctx, b, rdb)
	b.ReportAllocs()
	envelopes := 0
	for b.Loop() {
		queuetest.DeliveryCycle(ctx, b, q, &next, now)
		envelopes += queuetest.CycleBatch
	}
	b.ReportMetric(float64((redisCPU(ctx, b, rdb)-cpu0).Microseconds())/float64(envelopes), "redis-µs/envelope")
	b.ReportMetric(float64(testing.AllocsPerRun(1, func() { queuetest.DeliveryCycle(ctx, b, q, &next, now) }))/queuetest.CycleBatch, "allocs/envelope")
}

// redisCPU is redis-server's CPU time so far (INFO cpu, user and system).
func redisCPU(ctx context.Context, tb testing.TB, rdb *redis.Client) time.Duration {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		tb.Fatal(err)
	}
	cpu, err := redistest.CPU(info)
	if err != nil {
		tb.Fatal(err)
	}
	return cpu
}
