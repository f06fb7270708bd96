package boltqueue

import (
	"fmt"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/internal/bolttest"
	"github.com/hookgate/hookgate/sender"
)

// TestMoveIsBounded: a Move of 40 envelopes of 1 MiB writes them in
// transactions of a bounded size (each allocates the pages it writes:
// bbolt's own count), not all in one: a batch held up to 500 payloads,
// 300 of 1 MiB took 884 MiB of heap (issue 29, item 7).
func TestMoveIsBounded(t *testing.T) {
	db := bolttest.Open(t, &bolt.Options{NoSync: true})
	q, err := New(db, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.UnixMilli(1_800_000_000_000)
	const n, size = 40, 1 << 20
	for i := range n {
		e := &sender.Envelope{ID: fmt.Sprintf("big-%02d", i), Destination: "old", CreatedAt: t0, NextAt: t0, Payload: make([]byte, size)}
		if _, err := q.Enqueue(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	pages := func() int64 { st := db.Stats(); return st.TxStats.GetPageAlloc() }
	write := q.write
	var most int64
	q.write = func(fn func(*bolt.Tx) error) error {
		before := pages()
		err := write(fn)
		most = max(most, pages()-before)
		return err
	}
	moved, kept, err := q.Move(t.Context(), "old", "new", t0)
	if err != nil || moved != n || kept != 0 {
		t.Fatalf("Move = %d, %d, %v; want %d moved", moved, kept, err, n)
	}
	// A bbolt leaf holds two values at least, and one touched is written
	// whole: a batch writes up to about three times its payloads.
	if limit := int64(4 * moveBytes); most > limit {
		t.Errorf("a Move transaction allocated %d bytes of pages, over %d: its batch is not bounded by its payloads", most, limit)
	}
}
