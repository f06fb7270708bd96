package redisqueue_test

import (
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/internal/redistest"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/redisqueue"
)

// TestCorruptWaitingEnvelopeIsSetAside: an envelope that waits behind its
// entity's head, and whose record no longer decodes, is set aside when
// the head settles (Stats.Corrupt), never dropped while still stored; the
// entity's next then goes.
func TestCorruptWaitingEnvelopeIsSetAside(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	p := redistest.Prefix("test")
	q := redisqueue.New(rdb, p, time.Hour).WithCallerClock()
	q.Order("d", sender.Ordering{ByEntity: true})
	t0 := time.UnixMilli(1_800_000_000_000)
	ctx := t.Context()
	for _, id := range []string{"a/1", "a/2", "a/3"} {
		if _, err := q.Enqueue(ctx, &sender.Envelope{ID: id, Destination: "d", Entity: "a", CreatedAt: t0, NextAt: t0, Payload: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.HSet(ctx, p+":q:{d}:meta", "a/2", "\xffjunk").Err(); err != nil {
		t.Fatal(err)
	}
	got, err := q.Lease(ctx, "d", 10, t0, time.Minute)
	if err != nil || len(got) != 1 || got[0].ID != "a/1" {
		t.Fatalf("Lease = %v, %v; want the head a/1", got, err)
	}
	if _, err := q.Settle(ctx, "d", []sender.Outcome{{Kind: sender.Delivered, ID: "a/1", LeaseUntil: got[0].LeaseUntil}}, t0); err != nil {
		t.Fatal(err)
	}
	// a/2 is due, set aside by this lease; a/3 is the head then.
	if got, err := q.Lease(ctx, "d", 10, t0, time.Minute); len(got) != 0 {
		t.Fatalf("Lease = %v, %v; want nothing: a/2 set aside", got, err)
	}
	st, err := q.Stats(ctx, "d", t0)
	if err != nil || st.Corrupt != 1 || st.Waiting != 0 {
		t.Errorf("Stats = %+v, %v; want a/2 set aside, nothing waiting", st, err)
	}
	got, err = q.Lease(ctx, "d", 10, t0, time.Minute)
	var leased []string
	for _, l := range got {
		leased = append(leased, l.ID)
	}
	if err != nil || !slices.Equal(leased, []string{"a/3"}) {
		t.Errorf("Lease = %v, %v; want a/3: the entity goes on", leased, err)
	}
}
