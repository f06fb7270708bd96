package redisqueue_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/internal/redistest"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/redisqueue"
)

// TestABrokenDeadLetterIsListedNotAnError: a dead letter whose record does
// not decode is listed as broken (its reason in last_error, purgeable),
// never an error that stops every scan of its destination or the move of
// an orphan (where it stays, kept).
func TestABrokenDeadLetterIsListedNotAnError(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	p := redistest.Prefix("test")
	q := redisqueue.New(rdb, p, time.Hour).WithCallerClock()
	t0 := time.UnixMilli(1_800_000_000_000)
	ctx := t.Context()
	for _, id := range []string{"a", "b"} {
		if _, err := q.Enqueue(ctx, &sender.Envelope{ID: id, Destination: "d", CreatedAt: t0, NextAt: t0, Payload: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
	}
	l, _ := q.Lease(ctx, "d", 2, t0, time.Minute)
	var os []sender.Outcome
	for _, x := range l {
		e := *x.Envelope
		e.DeadAt = t0
		os = append(os, sender.Outcome{Kind: sender.Dead, ID: e.ID, LeaseUntil: x.LeaseUntil, Envelope: &e})
	}
	if _, err := q.Settle(ctx, "d", os, t0); err != nil {
		t.Fatal(err)
	}
	rdb.HSet(ctx, p+":q:{d}:meta", "a", "\xff2345678junkjunkjunkjunk") // as TestCorruptEntryIsSetAside damages it
	dlq := sender.NewSettled(q, func() []string { return []string{"d", "e"} }, 0, func() time.Time { return t0 })
	if groups, total, _, err := dlq.Summary(ctx, sender.Filter{}, 0); err != nil {
		t.Errorf("Summary: %v (want b counted, a listed as broken)", err)
	} else if total != 2 || len(groups) != 2 || (groups[0].Class != "broken" && groups[1].Class != "broken") {
		t.Errorf("Summary = %+v, total %d; want b's group and a's as broken", groups, total)
	}
	if _, _, err := q.Move(ctx, "d", "e", t0); err != nil {
		t.Errorf("Move: %v (want b moved, a set aside)", err)
	}
}

// TestRedriveCountsWrittenAfterTheirTrimAreTrimmed: a letter of a redrive
// still pending when the redrive's counts are trimmed (a long retry
// schedule, a paused destination) counts again when it settles; those
// counts are dated then, and trimmed in their turn.
func TestRedriveCountsWrittenAfterTheirTrimAreTrimmed(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	p := redistest.Prefix("test")
	q := redisqueue.New(rdb, p, time.Hour).WithCallerClock()
	t0 := time.UnixMilli(1_800_000_000_000)
	ctx := t.Context()
	enqueue := func(id string, at time.Time) {
		t.Helper()
		if _, err := q.Enqueue(ctx, &sender.Envelope{ID: id, Destination: "d", CreatedAt: t0, NextAt: at, Payload: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
	}
	deliver := func(want string, at time.Time) {
		t.Helper()
		l, _ := q.Lease(ctx, "d", 1, at, time.Minute)
		if len(l) != 1 || l[0].ID != want {
			t.Fatalf("leased %v at %v, want %s", l, at, want)
		}
		if _, err := q.Settle(ctx, "d", []sender.Outcome{{Kind: sender.Delivered, ID: want, LeaseUntil: l[0].LeaseUntil}}, at); err != nil {
			t.Fatal(err)
		}
	}
	enqueue("x", t0)
	enqueue("tick1", t0.Add(150*time.Minute))
	enqueue("tick2", t0.Add(48*time.Hour))
	l, _ := q.Lease(ctx, "d", 1, t0, time.Minute)
	e := *l[0].Envelope
	e.DeadAt = t0
	if _, err := q.Settle(ctx, "d", []sender.Outcome{{Kind: sender.Dead, ID: "x", LeaseUntil: l[0].LeaseUntil, Envelope: &e}}, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Redrive(ctx, "d", []string{"x"}, "rd_1", t0); err != nil {
		t.Fatal(err)
	}
	// x is leased and retried 3 hours out, past the retention (1 h).
	l, _ = q.Lease(ctx, "d", 1, t0, time.Minute)
	e = *l[0].Envelope
	e.NextAt = t0.Add(3 * time.Hour)
	if _, err := q.Settle(ctx, "d", []sender.Outcome{{Kind: sender.Retry, ID: "x", LeaseUntil: l[0].LeaseUntil, Envelope: &e}}, t0); err != nil {
		t.Fatal(err)
	}
	deliver("tick1", t0.Add(150*time.Minute)) // this settle trims rd_1's counts and its rdt entry
	deliver("x", t0.Add(3*time.Hour))         // rd_1:d is written again, with no rdt entry
	deliver("tick2", t0.Add(48*time.Hour))    // far past any retention
	fields, _ := rdb.HKeys(ctx, p+":q:{d}:rdc").Result()
	if len(fields) != 0 {
		t.Errorf("redrive counts left for ever (no rdt entry to trim them): %v", fields)
	}
}

// TestALongRedriveIDIsRefused: the scripts read a record's redrive ID by
// one length byte, so an envelope whose redrive ID is 128 bytes or more
// is refused, not stored to be misread.
func TestALongRedriveIDIsRefused(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	q := redisqueue.New(rdb, redistest.Prefix("test"), time.Hour).WithCallerClock()
	t0 := time.UnixMilli(1_800_000_000_000)
	ctx := t.Context()
	long := "rd_" + strings.Repeat("0", 200)
	if _, err := q.Enqueue(ctx, &sender.Envelope{ID: "x", Destination: "d", CreatedAt: t0, NextAt: t0, RedriveID: long, Payload: []byte("{}")}); err == nil {
		t.Fatal("an envelope with a 203-byte redrive ID was enqueued")
	}
	if moved, err := q.Redrive(ctx, "d", []string{"x"}, long, t0); err == nil {
		t.Errorf("a redrive under a 203-byte ID: %v, nil", moved)
	}
	if st, _ := q.Stats(ctx, "d", t0); st.Queued != 0 {
		t.Errorf("Stats = %+v, want nothing stored", st)
	}
}

// TestEnqueueAfterADropElsewhereRegistersTheName: an instance remembers
// which destination names it registered; when another instance drops a
// name (an orphan purged while the config still rolls out), the next
// enqueue that makes it hold an envelope again registers it again, so
// the destination is never one nobody can find.
func TestEnqueueAfterADropElsewhereRegistersTheName(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	p := redistest.Prefix("test")
	a, b := redisqueue.New(rdb, p, time.Hour), redisqueue.New(rdb, p, time.Hour)
	t0 := time.UnixMilli(1_800_000_000_000)
	ctx := t.Context()
	if _, err := b.Enqueue(ctx, &sender.Envelope{ID: "1", Destination: "d", CreatedAt: t0, NextAt: t0, Payload: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Drop(ctx, "d"); err != nil { // purged as an orphan on a
		t.Fatal(err)
	}
	if _, err := b.Enqueue(ctx, &sender.Envelope{ID: "2", Destination: "d", CreatedAt: t0, NextAt: t0, Payload: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	names, _ := a.Destinations(ctx)
	if st, _ := a.Stats(ctx, "d", t0); st.Queued == 1 && !slices.Contains(names, "d") {
		t.Errorf("d holds %d queued, but Destinations = %v: an orphan nobody can find", st.Queued, names)
	}
}
