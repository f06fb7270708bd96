package boltqueue_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/bolttest"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/boltqueue"
)

func benchQueue(b *testing.B) *boltqueue.Queue {
	db := bolttest.Open(b, nil)
	q, err := boltqueue.New(db, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	return q
}

// BenchmarkEnqueue is webhook_enqueue's write, on a file with fsync: from
// one producer (each enqueue waits for its own commit) and from 32 at once.
func BenchmarkEnqueue(b *testing.B) {
	payload := []byte(`{"type":"reservation.confirmed","reservation_id":"r-1"}`)
	for _, conc := range []int{1, 32} {
		b.Run(fmt.Sprintf("c%d", conc), func(b *testing.B) {
			q := benchQueue(b)
			now := time.Now()
			var seq atomic.Int64
			b.SetParallelism(max(conc/2, 1)) // GOMAXPROCS is 2 on the bench machine
			if conc == 1 {
				b.SetParallelism(1)
			}
			run := func() {
				id := fmt.Sprintf("evt_%d", seq.Add(1))
				e := &sender.Envelope{ID: id, Destination: "d", CreatedAt: now, NextAt: now, Payload: payload}
				if _, err := q.Enqueue(b.Context(), e); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			if conc == 1 {
				for b.Loop() {
					run()
				}
				return
			}
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					run()
				}
			})
		})
	}
}
