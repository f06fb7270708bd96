// Package bolttest opens bbolt files for tests.
package bolttest

import (
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// Open opens a new bbolt file, state.db in tb's temporary directory, with
// opts (nil for bbolt's defaults; boltfile.Options for the gateway's),
// and closes it when tb ends.
func Open(tb testing.TB, opts *bolt.Options) *bolt.DB {
	tb.Helper()
	db, err := bolt.Open(filepath.Join(tb.TempDir(), "state.db"), 0o600, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = db.Close() })
	return db
}
