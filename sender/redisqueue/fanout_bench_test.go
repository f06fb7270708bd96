package redisqueue_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/internal/redistest"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/redisqueue"
)

// BenchmarkFanOut compares one event fanned out to five destinations
// (Sender.Publish) with the same event enqueued five times by name
// (Sender.Enqueue), on a real Redis: what a producer pays for letting
// hookgate route. Each op is one event to all five.
func BenchmarkFanOut(b *testing.B) {
	srv := redistest.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	b.Cleanup(func() { _ = rdb.Close() })
	var dests []sender.Destination
	for i := range 5 {
		dests = append(dests, sender.Destination{Name: fmt.Sprintf("d%d", i), URL: "http://127.0.0.1:1/", Events: []string{"reservation.*"}})
	}
	payload := []byte(`{"type":"reservation.confirmed","reservation":"r-1","seat":"s-1"}`)
	for _, mode := range []string{"publish", "enqueue-5"} {
		b.Run(mode, func(b *testing.B) {
			q := redisqueue.New(rdb, "bench"+mode, time.Hour)
			s, err := sender.New(q, sender.Config{}, dests, sender.Options{})
			if err != nil {
				b.Fatal(err)
			}
			ctx := b.Context()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				id := fmt.Sprintf("evt_%012d", i)
				if mode == "publish" {
					r, err := s.Publish(ctx, &sender.Event{ID: id, EventType: "reservation.confirmed", Payload: payload})
					if err != nil || len(r.Deliveries) != 5 {
						b.Fatalf("%+v, %v", r, err)
					}
					continue
				}
				for _, d := range dests {
					if _, err := s.Enqueue(ctx, &sender.Envelope{ID: id, Destination: d.Name, EventType: "reservation.confirmed", Payload: payload}); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
