package redisqueue_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/internal/redistest"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/redisqueue"
)

// TestTrimHistoryWritesNothingWhenNothingIsDue: the trim of a quiet
// destination is a read until something is due: no write reaches the
// AOF or the replicas.
func TestTrimHistoryWritesNothingWhenNothingIsDue(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	q := redisqueue.New(rdb, redistest.Prefix("test"), time.Hour).WithCallerClock()
	q.KeepHistory(sender.History{Keep: time.Hour, Payload: time.Minute})
	t0 := time.UnixMilli(1_800_000_000_000)
	if _, err := q.Enqueue(t.Context(), &sender.Envelope{ID: "p1", Destination: "d", CreatedAt: t0, NextAt: t0, Payload: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	l, err := q.Lease(t.Context(), "d", 1, t0, time.Minute)
	if err != nil || len(l) != 1 {
		t.Fatalf("Lease = %v, %v", l, err)
	}
	if _, err := q.Settle(t.Context(), "d", []sender.Outcome{{Kind: sender.Delivered, ID: "p1", LeaseUntil: l[0].LeaseUntil, Envelope: l[0].Envelope}}, t0); err != nil {
		t.Fatal(err)
	}
	changes := func() int {
		info, err := rdb.Info(t.Context(), "persistence").Result()
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "rdb_changes_since_last_save:"); ok {
				n, _ := strconv.Atoi(v)
				return n
			}
		}
		t.Fatal("INFO persistence has no rdb_changes_since_last_save")
		return 0
	}
	before := changes()
	for _, dest := range []string{"d", "never-seen"} {
		for range 10 {
			if _, err := q.TrimHistory(t.Context(), dest, t0.Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := changes() - before; n != 0 {
		t.Errorf("20 trims with nothing due made %d changes, want none", n)
	}
	if _, err := q.TrimHistory(t.Context(), "d", t0.Add(time.Minute+time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if changes() == before {
		t.Error("the trim of a payload past its time changed nothing")
	}
}
