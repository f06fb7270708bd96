package redisqueue_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/internal/redistest"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/queuetest"
	"github.com/hookgate/hookgate/sender/redisqueue"
)

func TestReview(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{srv.Addr()}})
	t.Cleanup(func() { rdb.Close() })
	queuetest.RunReview(t, func(t *testing.T, retention time.Duration) sender.Queue {
		return redisqueue.New(rdb, prefix(), retention).WithCallerClock()
	})
}

// legacy is an envelope in the layout before version 2 (the env hash's
// value: fingerprint + the whole envelope).
func legacy(id string, t0 time.Time) string {
	e := &sender.Envelope{ID: id, Destination: "d", EventType: "x", CreatedAt: t0, NextAt: t0, Payload: []byte(`{"id":"` + id + `"}`)}
	fp := sender.Fingerprint(e.Payload)
	return string(fp[:]) + string(sender.MarshalEnvelope(e))
}

// TestReviewLeaseBeforeUpgradeStrandsLegacyEnvelopes: caddymodule/store.go
// runs Upgrade with a 30 s budget and, when it fails, logs "they wait,
// undelivered, until a start that can" and starts the sender anyway. The
// sender's Lease pops the legacy IDs from the ready list, finds no record,
// and "sets them aside" (quarantineScript: ZREM leased; nothing is copied
// to corrupt because the record is missing). A later, successful Upgrade
// writes their record and payload, but no index holds them any more: they
// are never leased, counted, listed or redriven.
func TestReviewLeaseBeforeUpgradeStrandsLegacyEnvelopes(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { rdb.Close() })
	p := prefix()
	t0 := time.UnixMilli(1_800_000_000_000)
	ctx := t.Context()
	k := p + ":q:{d}:"
	rdb.HSet(ctx, k+"env", "q1", legacy("q1", t0))
	rdb.RPush(ctx, k+"ready", "q1")

	q := redisqueue.New(rdb, p, time.Hour).WithCallerClock()
	// The upgrade did not run (or failed part-way); the sender polls.
	if got, err := q.Lease(ctx, "d", 10, t0, time.Minute); err != nil || len(got) != 0 {
		t.Fatalf("Lease before the upgrade = %v, %v", got, err)
	}
	if n, err := q.Upgrade(ctx); err != nil || n != 1 {
		t.Fatalf("Upgrade = %d, %v", n, err)
	}
	got, err := q.Lease(ctx, "d", 10, t0.Add(2*time.Minute), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := q.Stats(ctx, "d", t0)
	_, state, gerr := q.Get(ctx, "d", "q1")
	if len(got) != 1 {
		t.Errorf("after the upgrade: leased %d; Stats %+v; Get(q1) state %q err %v: the legacy envelope is stored but in no index (stranded)", len(got), st, state, gerr)
	}
}

// TestReviewLegacyWriteAfterUpgradeIsStranded: "Safe at every start, and
// from several instances at once". During a rolling upgrade an instance
// of the previous version still enqueues into env (+ ready) after a new
// instance has marked the store upgraded: the new instance's Lease drops
// the ID (no record), and Upgrade never looks again (the layout key).
func TestReviewLegacyWriteAfterUpgradeIsStranded(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { rdb.Close() })
	p := prefix()
	t0 := time.UnixMilli(1_800_000_000_000)
	ctx := t.Context()
	q := redisqueue.New(rdb, p, time.Hour).WithCallerClock()
	if _, err := q.Upgrade(ctx); err != nil {
		t.Fatal(err)
	}
	// The old instance's enqueue script: HSET env, RPUSH ready.
	k := p + ":q:{d}:"
	rdb.HSet(ctx, k+"env", "late", legacy("late", t0))
	rdb.RPush(ctx, k+"ready", "late")
	q.Lease(ctx, "d", 10, t0, time.Minute)
	q2 := redisqueue.New(rdb, p, time.Hour).WithCallerClock() // the next start
	if n, err := q2.Upgrade(ctx); err != nil || n != 1 {
		t.Errorf("a restart's Upgrade = %d, %v; the old instance's envelope stays in env, in no index: stranded", n, err)
	}
	if env, _ := rdb.HLen(ctx, k+"env").Result(); env != 0 {
		t.Errorf("%d envelopes left in the legacy env hash, in no index", env)
	}
}

// TestReviewCorruptDeadLetterBreaksTheDLQ: "An envelope that does not
// decode is set aside" holds for Lease only. One dead letter whose record
// does not decode fails Dead for its whole destination, so every
// unscoped DLQ List/Summary/Count/Redrive/Purge, and Move of the orphan.
func TestReviewCorruptDeadLetterBreaksTheDLQ(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { rdb.Close() })
	p := prefix()
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
	dlq := sender.NewDLQ(q, []string{"d", "e"}, 0, func() time.Time { return t0 })
	if _, total, _, err := dlq.Summary(ctx, sender.Filter{}, 0); err != nil {
		t.Errorf("Summary: %v (want b counted, a set aside)", err)
	} else if total != 1 {
		t.Errorf("Summary total = %d", total)
	}
	if _, _, err := q.Move(ctx, "d", "e", t0); err != nil {
		t.Errorf("Move: %v (want b moved, a set aside)", err)
	}
}

// TestReviewReviewOnCluster runs the review suite on a Cluster: every
// script must touch one slot.
func TestReviewOnCluster(t *testing.T) {
	addrs := redistest.StartCluster(t)
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: addrs, IsClusterMode: true})
	t.Cleanup(func() { rdb.Close() })
	queuetest.RunReview(t, func(t *testing.T, retention time.Duration) sender.Queue {
		return redisqueue.New(rdb, prefix(), retention).WithCallerClock()
	})
}

// TestReviewRedriveCountsRecreatedAfterTheirTrimLeak: the settle script
// trims a redrive's counts by rdt (first moved at + retention). A letter
// of that redrive still pending then (a long retry schedule, a paused
// destination) is counted again when it settles (HINCRBY rid:d), with no
// rdt entry: that hash field is never trimmed.
func TestReviewRedriveCountsRecreatedAfterTheirTrimLeak(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { rdb.Close() })
	p := prefix()
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
	q.Settle(ctx, "d", []sender.Outcome{{Kind: sender.Dead, ID: "x", LeaseUntil: l[0].LeaseUntil, Envelope: &e}}, t0)
	q.Redrive(ctx, "d", []string{"x"}, "rd_1", t0)
	// x is leased and retried 3 hours out, past the retention (1 h).
	l, _ = q.Lease(ctx, "d", 1, t0, time.Minute)
	e = *l[0].Envelope
	e.NextAt = t0.Add(3 * time.Hour)
	q.Settle(ctx, "d", []sender.Outcome{{Kind: sender.Retry, ID: "x", LeaseUntil: l[0].LeaseUntil, Envelope: &e}}, t0)
	deliver("tick1", t0.Add(150*time.Minute)) // this settle trims rd_1's counts and its rdt entry
	deliver("x", t0.Add(3*time.Hour))         // rd_1:d is written again, with no rdt entry
	deliver("tick2", t0.Add(48*time.Hour))    // far past any retention
	fields, _ := rdb.HKeys(ctx, p+":q:{d}:rdc").Result()
	if len(fields) != 0 {
		t.Errorf("redrive counts left for ever (no rdt entry to trim them): %v", fields)
	}
}

// TestReviewLongRedriveIDCorruptsTheRecord: the Lua scripts read the
// record's redrive ID as one length byte (string.byte(m, 18)); only
// Queue.Redrive refuses an ID of 128 bytes or more. Enqueue (and so
// Settle's rewrite) writes any RedriveID an Envelope carries, with a
// 2-byte uvarint length; the next redrive then rewrites the record at the
// wrong offsets, and the letter is set aside as corrupt at its next lease.
func TestReviewLongRedriveIDCorruptsTheRecord(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { rdb.Close() })
	q := redisqueue.New(rdb, prefix(), time.Hour).WithCallerClock()
	t0 := time.UnixMilli(1_800_000_000_000)
	ctx := t.Context()
	long := "rd_" + strings.Repeat("0", 200)
	if _, err := q.Enqueue(ctx, &sender.Envelope{ID: "x", Destination: "d", CreatedAt: t0, NextAt: t0, RedriveID: long, Payload: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	l, _ := q.Lease(ctx, "d", 1, t0, time.Minute)
	e := *l[0].Envelope
	e.DeadAt = t0
	q.Settle(ctx, "d", []sender.Outcome{{Kind: sender.Dead, ID: "x", LeaseUntil: l[0].LeaseUntil, Envelope: &e}}, t0)
	if moved, err := q.Redrive(ctx, "d", []string{"x"}, "rd_1", t0); err != nil || len(moved) != 1 {
		t.Fatalf("Redrive = %v, %v", moved, err)
	}
	got, err := q.Lease(ctx, "d", 1, t0, time.Minute)
	if err != nil || len(got) != 1 {
		st, _ := q.Stats(ctx, "d", t0)
		t.Errorf("after the redrive: leased %d, %v; Stats %+v (the record was rewritten at the wrong offsets)", len(got), err, st)
	}
}

// TestReviewDropForgetsANameAnotherInstanceStillWrites: register caches
// "this name is in the dests SET" per Queue (per process and config
// load). Drop on one instance SREMs the name; an instance that still has
// the destination configured (the config rolling out) keeps enqueuing
// without adding it back: those envelopes are in no Destinations, so never
// listed as an orphan, moved or purged.
func TestReviewDropForgetsANameAnotherInstanceStillWrites(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { rdb.Close() })
	p := prefix()
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
