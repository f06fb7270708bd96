package redisqueue_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/internal/redistest"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/redisqueue"
)

// cycleBatch is the envelopes of one cycle: bench/sender.sh's workers.
const cycleBatch = 20

// cycleAllocs is the allocation budget of one envelope's enqueue, lease
// and settlement (delivered) on Redis, in batches of cycleBatch (go-redis's
// own allocations included).
const cycleAllocs = 65

// cycle enqueues cycleBatch envelopes of a 500-byte payload, leases them,
// makes each a delivered attempt as the sender does, and settles them:
// one delivery each, as bench/sender.sh makes them. next numbers the IDs.
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
	q := redisqueue.New(rdb, prefix(), time.Hour)
	ctx := b.Context()
	payload := []byte(`{"type":"reservation.confirmed","data":"` + strings.Repeat("x", 500-44) + `"}`)
	now := time.Now()
	next := 0
	cycle(ctx, b, q, &next, payload, now) // scripts loaded
	if n := testing.AllocsPerRun(20, func() { cycle(ctx, b, q, &next, payload, now) }) / cycleBatch; n > cycleAllocs {
		b.Fatalf("an envelope's enqueue, lease and settlement allocate %.1f times; the budget is %d", n, cycleAllocs)
	}
	cpu0 := redisCPU(ctx, b, rdb)
	b.ReportAllocs()
	envelopes := 0
	for b.Loop() {
		cycle(ctx, b, q, &next, payload, now)
		envelopes += cycleBatch
	}
	b.ReportMetric(float64((redisCPU(ctx, b, rdb)-cpu0).Microseconds())/float64(envelopes), "redis-µs/envelope")
	b.ReportMetric(float64(testing.AllocsPerRun(1, func() { cycle(ctx, b, q, &next, payload, now) }))/cycleBatch, "allocs/envelope")
}

// redisCPU is redis-server's CPU time so far (INFO cpu, user and system).
func redisCPU(ctx context.Context, tb testing.TB, rdb *redis.Client) time.Duration {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(info, "\r\n") {
		for _, k := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if v, ok := strings.CutPrefix(line, k); ok {
				f, _ := strconv.ParseFloat(v, 64)
				sum += f
			}
		}
	}
	return time.Duration(sum * float64(time.Second))
}
