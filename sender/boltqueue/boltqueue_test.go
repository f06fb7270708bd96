package boltqueue_test

import (
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/internal/bolttest"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/boltqueue"
	"github.com/hookgate/hookgate/sender/queuetest"
)

// openQueue opens a queue on a new file, closed when the test ends.
func openQueue(t *testing.T, retention time.Duration) (*bolt.DB, *boltqueue.Queue) {
	t.Helper()
	db := bolttest.Open(t, nil)
	q, err := boltqueue.New(db, retention)
	if err != nil {
		t.Fatal(err)
	}
	return db, q
}

func TestConformance(t *testing.T) {
	queuetest.Run(t, func(t *testing.T, retention time.Duration) sender.Queue {
		_, q := openQueue(t, retention)
		return q
	})
}

// TestCorruptEntryIsSetAside: an entry that does not decode is set aside
// (counted as corrupt), never leased, and does not stop its destination.
func TestCorruptEntryIsSetAside(t *testing.T) {
	db, q := openQueue(t, time.Hour)
	t0 := time.UnixMilli(1_800_000_000_000)
	for _, id := range []string{"a", "b"} {
		if _, err := q.Enqueue(t.Context(), &sender.Envelope{ID: id, Destination: "d", CreatedAt: t0, NextAt: t0, Payload: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
	}
	// Damage "a": its record's format version.
	err := db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket([]byte("sender")).Bucket([]byte("d")).Bucket([]byte("meta"))
		v := append([]byte(nil), meta.Get([]byte("a"))...)
		v[0] = 0xff // an unknown format version
		return meta.Put([]byte("a"), v)
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := q.Lease(t.Context(), "d", 10, t0, time.Minute)
	if err != nil || len(got) != 1 || got[0].ID != "b" {
		t.Fatalf("Lease = %v, %v; want b alone", got, err)
	}
	st, _ := q.Stats(t.Context(), "d", t0)
	if st.Corrupt != 1 || st.Queued != 0 || st.Leased != 1 {
		t.Errorf("Stats = %+v, want 1 corrupt, 1 leased, none queued", st)
	}
	if got, _ := q.Lease(t.Context(), "d", 10, t0, time.Minute); len(got) != 0 {
		t.Errorf("a second lease = %v, want nothing", got)
	}
}

// TestBrokenExpiredLeaseIsSetAside: among leases that expired, an entry
// that does not decode, and an index entry whose envelope is gone, are set
// aside; the others come back and are leased again. (Either one stopped
// every lease of its destination.)
func TestBrokenExpiredLeaseIsSetAside(t *testing.T) {
	db, q := openQueue(t, time.Hour)
	t0 := time.UnixMilli(1_800_000_000_000)
	for _, id := range []string{"a", "b", "c"} {
		if _, err := q.Enqueue(t.Context(), &sender.Envelope{ID: id, Destination: "d", CreatedAt: t0, NextAt: t0, Payload: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := q.Lease(t.Context(), "d", 10, t0, time.Minute); err != nil || len(got) != 3 {
		t.Fatalf("Lease = %d, %v", len(got), err)
	}
	// The leases are lost (a crash). Damage a's envelope; b's is gone.
	err := db.Update(func(tx *bolt.Tx) error {
		d := tx.Bucket([]byte("sender")).Bucket([]byte("d"))
		meta := d.Bucket([]byte("meta"))
		v := append([]byte(nil), meta.Get([]byte("a"))...)
		v[0] = 0xff
		if err := meta.Put([]byte("a"), v); err != nil {
			return err
		}
		return d.Bucket([]byte("env")).Delete([]byte("b"))
	})
	if err != nil {
		t.Fatal(err)
	}
	later := t0.Add(2 * time.Minute)
	got, err := q.Lease(t.Context(), "d", 10, later, time.Minute)
	if err != nil || len(got) != 1 || got[0].ID != "c" {
		t.Fatalf("Lease after the leases expired = %v, %v; want c alone", got, err)
	}
	st, _ := q.Stats(t.Context(), "d", later)
	if st.Corrupt != 1 || st.Leased != 1 {
		t.Errorf("Stats = %+v, want 1 corrupt (a), 1 leased (c)", st)
	}
}

// TestIdlePollWritesNothing: leasing an idle destination, or a paused one,
// is a read: no write transaction, so no fsync per poll.
func TestIdlePollWritesNothing(t *testing.T) {
	db, q := openQueue(t, time.Hour)
	t0 := time.UnixMilli(1_800_000_000_000)
	later := &sender.Envelope{ID: "later", Destination: "d", CreatedAt: t0, NextAt: t0.Add(time.Hour), Payload: []byte("{}")}
	if _, err := q.Enqueue(t.Context(), later); err != nil {
		t.Fatal(err)
	}
	if err := q.SetPaused(t.Context(), "p", true, "operator"); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(t.Context(), &sender.Envelope{ID: "x", Destination: "p", CreatedAt: t0, NextAt: t0, Payload: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	writes := func() int64 { st := db.Stats(); return st.TxStats.GetWrite() }
	before := writes()
	for range 20 {
		for _, dest := range []string{"d", "p", "never-seen"} {
			if got, err := q.Lease(t.Context(), dest, 10, t0, time.Minute); err != nil || len(got) != 0 {
				t.Fatalf("Lease(%s) = %v, %v; want nothing", dest, got, err)
			}
		}
		if _, err := q.Stats(t.Context(), "d", t0); err != nil {
			t.Fatal(err)
		}
	}
	if w := writes() - before; w != 0 {
		t.Errorf("60 idle polls wrote %d pages, want none", w)
	}
	if got, err := q.Lease(t.Context(), "d", 10, t0.Add(time.Hour), time.Minute); err != nil || len(got) != 1 {
		t.Errorf("once due: Lease = %v, %v", got, err)
	}
}
