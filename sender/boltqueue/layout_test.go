package boltqueue_test

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/internal/bolttest"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/boltqueue"
)

// TestAnotherLayoutIsRefused: a file whose sender's queue is in another
// layout (one recorded, or destinations and none recorded: the files
// written before the version was kept) is refused at New, with an error
// naming the version and the way out, and nothing of it is read or
// written; a file without a queue is given the current version.
func TestAnotherLayoutIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(tx *bolt.Tx) error
		version string
	}{
		{"none recorded", func(tx *bolt.Tx) error {
			root, err := tx.CreateBucket([]byte("sender"))
			if err != nil {
				return err
			}
			d, err := root.CreateBucket([]byte("d"))
			if err != nil {
				return err
			}
			_, err = d.CreateBucket([]byte("done")) // delivered IDs, as before the history
			return err
		}, "2 or earlier"},
		{"another recorded", func(tx *bolt.Tx) error {
			b, err := tx.CreateBucket([]byte("sender_layout"))
			if err != nil {
				return err
			}
			return b.Put([]byte("version"), []byte("7"))
		}, `"7"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			if err := db.Update(tc.prepare); err != nil {
				t.Fatal(err)
			}
			writes := func() int64 { st := db.Stats(); return st.TxStats.GetWrite() }
			before := writes()
			_, err = boltqueue.New(db, time.Hour)
			if !errors.Is(err, boltqueue.ErrLayout) {
				t.Fatalf("New = %v, want ErrLayout", err)
			}
			for _, want := range []string{path, "layout version " + tc.version, "reads version " + boltqueue.LayoutVersion, "fresh store"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error %q does not say %q", err, want)
				}
			}
			if w := writes() - before; w != 0 {
				t.Errorf("refusing the file wrote %d pages, want none", w)
			}
		})
	}

	t.Run("fresh", func(t *testing.T) {
		db := bolttest.Open(t, nil)
		for range 2 { // recorded, then read
			if _, err := boltqueue.New(db, time.Hour); err != nil {
				t.Fatalf("New on a fresh file: %v", err)
			}
		}
		var v string
		_ = db.View(func(tx *bolt.Tx) error {
			v = string(tx.Bucket([]byte("sender_layout")).Get([]byte("version")))
			return nil
		})
		if v != boltqueue.LayoutVersion {
			t.Errorf("the recorded version = %q, want %q", v, boltqueue.LayoutVersion)
		}
	})
}

// TestAFileWithoutOrderingIsOrdered: ordering came within layout version
// 3. A file written without it (counts of 32 bytes, no ord bucket) is
// what this version writes while nothing is ordered, and opens as it is:
// its counts read, its envelopes leased, and its destinations ordered
// from then on. Once nothing waits and nothing is held, the counts are
// 32 bytes again.
func TestAFileWithoutOrderingIsOrdered(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	t0 := time.UnixMilli(1_800_000_000_000)
	open := func() (*bolt.DB, *boltqueue.Queue) {
		db, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		q, err := boltqueue.New(db, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return db, q
	}
	enqueue := func(q *boltqueue.Queue, id, entity string) {
		t.Helper()
		e := &sender.Envelope{ID: id, Destination: "d", Entity: entity, CreatedAt: t0, NextAt: t0, Payload: []byte("{}")}
		if _, err := q.Enqueue(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	lease := func(q *boltqueue.Queue, want ...string) []sender.Leased {
		t.Helper()
		got, err := q.Lease(t.Context(), "d", 10, t0, time.Minute)
		var ids []string
		for _, l := range got {
			ids = append(ids, l.ID)
		}
		slices.Sort(ids)
		if err != nil || !slices.Equal(ids, want) {
			t.Fatalf("Lease = %v, %v; want %v", ids, err, want)
		}
		return got
	}
	// layout reads the length of d's counts, and whether it has an ord
	// bucket.
	layout := func(db *bolt.DB) (counts int, ord bool) {
		t.Helper()
		err := db.View(func(tx *bolt.Tx) error {
			d := tx.Bucket([]byte("sender")).Bucket([]byte("d"))
			counts, ord = len(d.Get([]byte("counts"))), d.Bucket([]byte("ord")) != nil
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return counts, ord
	}

	db, q := open()
	enqueue(q, "x", "")
	enqueue(q, "y", "a") // an entity, unordered
	if counts, ord := layout(db); counts != 32 || ord {
		t.Fatalf("unordered, the file holds counts of %d bytes and an ord bucket: %v; want 32 bytes and none", counts, ord)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db, q = open()
	q.Order("d", sender.Ordering{ByEntity: true})
	enqueue(q, "a/1", "a")
	enqueue(q, "a/2", "a")
	if st, _ := q.Stats(t.Context(), "d", t0); st.Queued != 4 || st.Waiting != 1 {
		t.Errorf("Stats = %+v, want 4 queued, a/2 waiting", st)
	}
	if counts, ord := layout(db); counts != 48 || !ord {
		t.Errorf("ordered, the file holds counts of %d bytes and an ord bucket: %v; want 48 bytes and one", counts, ord)
	}
	for _, want := range [][]string{{"a/1", "x", "y"}, {"a/2"}} {
		var os []sender.Outcome
		for _, l := range lease(q, want...) {
			os = append(os, sender.Outcome{Kind: sender.Delivered, ID: l.ID, LeaseUntil: l.LeaseUntil})
		}
		if _, err := q.Settle(t.Context(), "d", os, t0); err != nil {
			t.Fatal(err)
		}
	}
	if st, _ := q.Stats(t.Context(), "d", t0); st.Queued != 0 || st.Waiting != 0 || st.History != 4 {
		t.Errorf("Stats at the end = %+v, want none queued or waiting, 4 delivered", st)
	}
	if counts, _ := layout(db); counts != 32 {
		t.Errorf("with nothing waiting, the counts are %d bytes, want 32", counts)
	}
}
