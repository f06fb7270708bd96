package boltfile_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/internal/boltfile"
)

// TestLongReadHoldsNoWrite: a file opened by OpenFile takes 16 MiB of
// writes while a read transaction stays open (a backup, an export): its
// memory map is large enough from the start that no write remaps it, and
// a remap would wait for the read to end. The minute is a guard against a
// hang, not a measure.
func TestLongReadHoldsNoWrite(t *testing.T) {
	db, err := boltfile.OpenFile(filepath.Join(t.TempDir(), "state.db"), time.Second, false, false)
	if err != nil {
		t.Fatal(err)
	}
	read, err := db.Begin(false)
	if err != nil {
		t.Fatal(err)
	}
	ended := false
	end := func() {
		if !ended {
			ended = true
			_ = read.Rollback()
		}
	}
	t.Cleanup(func() {
		end()
		_ = db.Close()
	})
	done := make(chan error, 1)
	go func() {
		value := bytes.Repeat([]byte("x"), 64<<10)
		for i := range 256 {
			if err := db.Update(func(tx *bolt.Tx) error {
				b, err := tx.CreateBucketIfNotExists([]byte("t"))
				if err != nil {
					return err
				}
				return b.Put(fmt.Appendf(nil, "k%03d", i), value)
			}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		end()  // lets the writes finish, so that the file closes
		<-done //nolint:errcheck // the failure is the wait itself
		t.Fatal("16 MiB of writes waited for a read transaction: the file was remapped")
	}
}
