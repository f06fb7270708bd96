package boltqueue_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/internal/bolttest"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/boltqueue"
)

var t0 = time.UnixMilli(1_800_000_000_000)

func envelope(dest, id string, at time.Time) *sender.Envelope {
	return &sender.Envelope{ID: id, Destination: dest, EventType: "seat.released", CreatedAt: at, NextAt: at, Payload: []byte(`{"id":"` + id + `"}`)}
}

// deliver enqueues id in dest at at (unless it is there already), leases
// it and settles it delivered at at, with an attempt of status.
func deliver(t *testing.T, q *boltqueue.Queue, dest, id string, at time.Time, status int) {
	t.Helper()
	if _, err := q.Enqueue(t.Context(), envelope(dest, id, at)); err != nil {
		t.Fatal(err)
	}
	l, err := q.Lease(t.Context(), dest, 1, at, time.Minute)
	if err != nil || len(l) != 1 || l[0].ID != id {
		t.Fatalf("Lease(%s) = %v, %v; want %s", dest, l, err, id)
	}
	e := *l[0].Envelope
	e.Log = append(slices.Clone(e.Log), sender.Attempt{At: at, Status: status, RedriveID: e.RedriveID})
	e.LastStatus = status
	if n, err := q.Settle(t.Context(), dest, []sender.Outcome{{Kind: sender.Delivered, ID: id, LeaseUntil: l[0].LeaseUntil, Envelope: &e}}, at); err != nil || n != 0 {
		t.Fatalf("Settle(%s) = %d, %v", id, n, err)
	}
}

// keys counts the keys of each of dest's buckets names.
func keys(t *testing.T, db *bolt.DB, dest string, names ...string) []int {
	t.Helper()
	out := make([]int, len(names))
	err := db.View(func(tx *bolt.Tx) error {
		d := tx.Bucket([]byte("sender")).Bucket([]byte(dest))
		for i, n := range names {
			if b := d.Bucket([]byte(n)); b != nil {
				out[i] = b.Stats().KeyN
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestHistoryLooksAtABoundedNumberPerCall: a filter that matches nothing
// answers an empty page and where it stopped, not a walk of everything.
func TestHistoryLooksAtABoundedNumberPerCall(t *testing.T) {
	db := bolttest.Open(t, &bolt.Options{NoSync: true})
	q, err := boltqueue.New(db, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	n := boltqueue.HistoryScan + 1
	for i := range n {
		if _, err := q.Enqueue(t.Context(), envelope("d", fmt.Sprintf("m%04d", i), t0)); err != nil {
			t.Fatal(err)
		}
	}
	l, err := q.Lease(t.Context(), "d", n, t0, time.Minute)
	if err != nil || len(l) != n {
		t.Fatalf("Lease = %d, %v", len(l), err)
	}
	var os []sender.Outcome
	for _, x := range l {
		os = append(os, sender.Outcome{Kind: sender.Delivered, ID: x.ID, LeaseUntil: x.LeaseUntil})
	}
	if _, err := q.Settle(t.Context(), "d", os, t0); err != nil {
		t.Fatal(err)
	}
	none := sender.HistoryFilter{EventType: "invoice.paid"}
	got, next, err := q.History(t.Context(), "d", none, "", 10)
	if err != nil || len(got) != 0 || next == "" {
		t.Fatalf("History matching nothing = %d, %q, %v; want none, and where it stopped", len(got), next, err)
	}
	if got, next, err = q.History(t.Context(), "d", none, next, 10); err != nil || len(got) != 0 || next != "" {
		t.Errorf("its next page = %d, %q, %v; want none, at the end", len(got), next, err)
	}
	if _, _, err := q.History(t.Context(), "d", none, "junk", 10); !errors.Is(err, sender.ErrBadFilter) {
		t.Errorf("a bad cursor: err = %v, want ErrBadFilter", err)
	}
}

// TestASettlementReplacesTheEntry: an envelope settled again (resent)
// keeps one entry and one kept payload, its newest.
func TestASettlementReplacesTheEntry(t *testing.T) {
	db, q := openQueue(t, time.Hour)
	q.KeepHistory(sender.History{Keep: time.Hour, Payload: time.Hour})
	deliver(t, q, "d", "m1", t0, 200)
	at := t0.Add(time.Minute)
	if moved, err := q.Resend(t.Context(), "d", []string{"m1"}, "rs_1", at); err != nil || len(moved) != 1 {
		t.Fatalf("Resend = %v, %v", moved, err)
	}
	if got := keys(t, db, "d", "hist", "hidx", "hpay", "hpayt"); !slices.Equal(got, []int{1, 1, 0, 0}) {
		t.Errorf("after the resend hist, hidx, hpay, hpayt hold %v keys; want the entry, its payload back in the queue", got)
	}
	deliver(t, q, "d", "m1", at, 201)
	if got := keys(t, db, "d", "hist", "hidx", "hpay", "hpayt"); !slices.Equal(got, []int{1, 1, 1, 1}) {
		t.Errorf("after the second delivery hist, hidx, hpay, hpayt hold %v keys; want one of each", got)
	}
	e, st, err := q.Get(t.Context(), "d", "m1")
	if err != nil || st != sender.StateDelivered || len(e.Log) != 2 || e.LastStatus != 201 || e.RedriveID != "rs_1" || string(e.Payload) != `{"id":"m1"}` {
		t.Errorf("Get = %+v, %s, %v", e, st, err)
	}
}

// TestMoveCarriesTheHistory: each ID's newest entry, from or to, is to's
// after a Move, with its kept payload; from holds none.
func TestMoveCarriesTheHistory(t *testing.T) {
	_, q := openQueue(t, time.Hour)
	q.KeepHistory(sender.History{Keep: time.Hour, Payload: time.Hour})
	deliver(t, q, "old", "m1", t0, 200)
	deliver(t, q, "new", "m2", t0.Add(time.Second), 201)
	deliver(t, q, "old", "m2", t0.Add(2*time.Second), 202) // newer: old's goes
	deliver(t, q, "old", "m3", t0.Add(3*time.Second), 203)
	deliver(t, q, "new", "m3", t0.Add(4*time.Second), 204) // newer: new's stays
	at := t0.Add(time.Minute)
	if _, _, err := q.Move(t.Context(), "old", "new", at); err != nil {
		t.Fatal(err)
	}
	type row struct {
		ID     string
		Status int
	}
	var rows []row
	got, _, err := q.History(t.Context(), "new", sender.HistoryFilter{}, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range got {
		rows = append(rows, row{m.ID, m.LastStatus})
	}
	if diff := cmp.Diff([]row{{"m3", 204}, {"m2", 202}, {"m1", 200}}, rows); diff != "" {
		t.Errorf("new's history after the move (-want +got):\n%s", diff)
	}
	if got, _, err := q.History(t.Context(), "old", sender.HistoryFilter{}, "", 10); err != nil || len(got) != 0 {
		t.Errorf("old's history after the move = %v, %v; want none", got, err)
	}
	if moved, err := q.Resend(t.Context(), "new", []string{"m1", "m2"}, "rs_1", at); err != nil || !slices.Equal(moved, []string{"m1", "m2"}) {
		t.Errorf("Resend after the move = %v, %v; want both, their payloads moved too", moved, err)
	}
}
