package boltstore_test

import (
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/dedupe/boltstore"
	"github.com/hookgate/hookgate/dedupe/storetest"
)

func open(t *testing.T, path string) (*bolt.DB, *boltstore.Store) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s, err := boltstore.New(db, boltstore.Options{PurgeEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return db, s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Backend {
		db, s := open(t, filepath.Join(t.TempDir(), "state.db"))
		t.Cleanup(func() { _ = s.Close(); _ = db.Close() })
		return s
	})
}

// TestRecordsSurviveReopenAndPurge checks durability across a reopen of the
// file, and that the purge deletes expired entries and nothing else.
func TestRecordsSurviveReopenAndPurge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, s := open(t, path)
	t0 := time.Unix(1_800_000_000, 0)
	fp := dedupe.FingerprintOf([]byte("x"))
	for i, key := range []string{"short", "long"} {
		retention := []time.Duration{time.Minute, time.Hour}[i]
		if _, err := s.Claim(t.Context(), key, dedupe.Claim{Fingerprint: fp, Token: "t", Lease: time.Second, Retention: retention, Now: t0}); err != nil {
			t.Fatal(err)
		}
		if err := s.Record(t.Context(), key, "t", dedupe.Record{Status: 200}, retention, t0); err != nil {
			t.Fatal(err)
		}
	}
	_ = s.Close()
	_ = db.Close()

	db, s = open(t, path)
	defer func() { _ = db.Close() }()
	defer func() { _ = s.Close() }()
	for _, key := range []string{"short", "long"} {
		e, err := s.Get(t.Context(), key, t0)
		if err != nil || e.State != dedupe.StateRecorded {
			t.Fatalf("after reopen, Get(%s) = %+v, %v; want recorded", key, e, err)
		}
	}
	n, err := s.Purge(t0.Add(2 * time.Minute))
	if err != nil || n != 1 {
		t.Fatalf("Purge = %d, %v; want 1 deleted", n, err)
	}
	if err := db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("dedupe"))
		if b.Get([]byte("short")) != nil || b.Get([]byte("long")) == nil {
			t.Error("purge deleted the wrong entries")
		}
		if got := tx.Bucket([]byte("dedupe_expiry")).Stats().KeyN; got != 1 {
			t.Errorf("expiry index holds %d keys, want 1", got)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
