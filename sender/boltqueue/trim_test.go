package boltqueue_test

import (
	"testing"
	"time"

	"github.com/hookgate/hookgate/sender"
)

// TestTrimHistoryWritesNothingWhenNothingIsDue: the trim of a quiet
// destination is a read until something is due: no write transaction,
// so no fsync per check.
func TestTrimHistoryWritesNothingWhenNothingIsDue(t *testing.T) {
	db, q := openQueue(t, time.Hour)
	q.KeepHistory(sender.History{Keep: time.Hour, Payload: time.Minute})
	deliver(t, q, "d", "p1", t0, 200)
	writes := func() int64 { st := db.Stats(); return st.TxStats.GetWrite() }
	before := writes()
	for _, dest := range []string{"d", "never-seen"} {
		for range 10 {
			if _, err := q.TrimHistory(t.Context(), dest, t0.Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if w := writes() - before; w != 0 {
		t.Errorf("20 trims with nothing due wrote %d pages, want none", w)
	}
	if _, err := q.TrimHistory(t.Context(), "d", t0.Add(time.Minute+time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if writes() == before {
		t.Error("the trim of a payload past its time wrote nothing")
	}
}
