package boltqueue_test

import (
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/boltqueue"
	"github.com/hookgate/hookgate/sender/queuetest"
)

func TestConformance(t *testing.T) {
	queuetest.Run(t, func(t *testing.T, retention time.Duration) sender.Queue {
		db, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		q, err := boltqueue.New(db, retention)
		if err != nil {
			t.Fatal(err)
		}
		return q
	})
}
