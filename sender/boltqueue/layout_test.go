package boltqueue_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/internal/bolttest"
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
