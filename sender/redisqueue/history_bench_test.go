package redisqueue_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/internal/redistest"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/redisqueue"
)

// BenchmarkHistoryBytes measures the Redis memory one delivered envelope
// costs in all (its history entry, the index that also makes the enqueue
// idempotent, and its payload while kept), against issue 19's budget of
// 300 bytes once the payload has expired. Each run delivers b.N envelopes
// of a realistic shape (a 1 KiB payload, an ID, a type, an entity, a
// trace context) through enqueue, lease and settle, on its own redis-server,
// and reads used_memory before and after. Run with -benchtime=20000x.
func BenchmarkHistoryBytes(b *testing.B) {
	for _, tc := range []struct {
		name    string
		payload time.Duration
	}{{"payload-expired", 0}, {"payload-kept", 24 * time.Hour}} {
		b.Run(tc.name, func(b *testing.B) {
			srv := redistest.Start(b)
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
			b.Cleanup(func() { _ = rdb.Close() })
			q := redisqueue.New(rdb, "bench", 7*24*time.Hour).WithCallerClock()
			q.KeepHistory(sender.History{Keep: 7 * 24 * time.Hour, Payload: tc.payload})
			ctx := b.Context()
			payload := []byte(`{"type":"reservation.confirmed","data":"` + strings.Repeat("x", 1000) + `"}`)
			now := time.Now()
			// Warm up: the keys exist, the script cache is loaded.
			deliver(b, q, now, "warm", 100, payload)
			before := usedMemory(b, rdb)
			b.ResetTimer()
			deliver(b, q, now, "evt", b.N, payload)
			b.StopTimer()
			after := usedMemory(b, rdb)
			b.ReportMetric(float64(after-before)/float64(b.N), "redis-bytes/delivered")
			if n, err := rdb.XLen(ctx, "bench:q:{enrollment}:hist").Result(); err != nil || n != int64(b.N+100) {
				b.Fatalf("history holds %d entries, %v; want %d", n, err, b.N+100)
			}
		})
	}
}

// deliver enqueues n envelopes and settles each delivered, in batches.
func deliver(b *testing.B, q *redisqueue.Queue, now time.Time, prefix string, n int, payload []byte) {
	b.Helper()
	ctx := b.Context()
	const batch = 100
	for i := 0; i < n; i += batch {
		k := min(batch, n-i)
		for j := range k {
			e := &sender.Envelope{
				ID: fmt.Sprintf("%s_%020d", prefix, i+j), Destination: "enrollment", EventType: "reservation.confirmed",
				Entity: "reservation:" + strconv.Itoa(i+j), EventTime: now, CreatedAt: now, NextAt: now, Payload: payload,
				TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
			}
			if _, err := q.Enqueue(ctx, e); err != nil {
				b.Fatal(err)
			}
		}
		l, err := q.Lease(ctx, "enrollment", k, now, time.Minute)
		if err != nil || len(l) != k {
			b.Fatalf("leased %d, %v", len(l), err)
		}
		var os []sender.Outcome
		for _, x := range l {
			e := *x.Envelope
			e.Log = append(e.Log, sender.Attempt{At: now, Status: 200, Latency: 8 * time.Millisecond})
			e.LastStatus = 200
			os = append(os, sender.Outcome{Kind: sender.Delivered, ID: e.ID, LeaseUntil: x.LeaseUntil, Envelope: &e})
		}
		if _, err := q.Settle(ctx, "enrollment", os, now); err != nil {
			b.Fatal(err)
		}
	}
}

func usedMemory(b *testing.B, rdb *redis.Client) int64 {
	b.Helper()
	info, err := rdb.Info(b.Context(), "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	b.Fatal("no used_memory in INFO memory")
	return 0
}
