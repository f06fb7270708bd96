package boltqueue_test

import (
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/sender"
)

// TestABrokenDeadLetterIsListedNotAnError: a dead letter whose record does
// not decode is listed as broken (its reason in last_error, purgeable),
// never an error that stops every scan of its destination or the move of
// an orphan (where it stays, kept).
func TestABrokenDeadLetterIsListedNotAnError(t *testing.T) {
	db, q := openQueue(t, time.Hour)
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
	err := db.Update(func(tx *bolt.Tx) error { // as TestCorruptEntryIsSetAside damages it
		meta := tx.Bucket([]byte("sender")).Bucket([]byte("d")).Bucket([]byte("meta"))
		v := append([]byte(nil), meta.Get([]byte("a"))...)
		v[0] = 0xff
		return meta.Put([]byte("a"), v)
	})
	if err != nil {
		t.Fatal(err)
	}
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
// schedule), or a moved letter counted in its new destination, writes
// counts that are dated then, and trimmed in their turn.
func TestRedriveCountsWrittenAfterTheirTrimAreTrimmed(t *testing.T) {
	db, q := openQueue(t, time.Hour)
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
	l, _ = q.Lease(ctx, "d", 1, t0, time.Minute)
	e = *l[0].Envelope
	e.NextAt = t0.Add(3 * time.Hour)
	if _, err := q.Settle(ctx, "d", []sender.Outcome{{Kind: sender.Retry, ID: "x", LeaseUntil: l[0].LeaseUntil, Envelope: &e}}, t0); err != nil {
		t.Fatal(err)
	}
	deliver("tick1", t0.Add(150*time.Minute)) // trims rd_1's counts
	deliver("x", t0.Add(3*time.Hour))         // rd_1's counts written again, no redrivet entry
	deliver("tick2", t0.Add(48*time.Hour))
	var left []string
	if err := db.View(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("sender")).Bucket([]byte("d")).Bucket([]byte("redrives")).ForEach(func(k, _ []byte) error {
			left = append(left, string(k))
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("redrive counts left for ever (no redrivet entry to trim them): %v", left)
	}
}
