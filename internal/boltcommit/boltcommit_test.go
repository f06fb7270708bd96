package boltcommit

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/internal/bolttest"
)

func openDB(tb testing.TB) *bolt.DB {
	tb.Helper()
	db := bolttest.Open(tb, &bolt.Options{Timeout: time.Second})
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("b")); return err }); err != nil {
		tb.Fatal(err)
	}
	return db
}

// TestCommitterFailureIsItsCallersOnly: among many concurrent writes, the
// ones whose function fails get their own error and leave no trace; every
// other write is committed.
func TestCommitterFailureIsItsCallersOnly(t *testing.T) {
	db := openDB(t)
	c := &Committer{db: db, maxGroup: 7}
	boom := errors.New("boom")
	const n = 200
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			errs[i] = c.Update(func(tx *bolt.Tx) error {
				if err := tx.Bucket([]byte("b")).Put(fmt.Appendf(nil, "k%d", i), []byte("v")); err != nil {
					return err
				}
				if i%10 == 3 {
					return boom
				}
				return nil
			})
		})
	}
	wg.Wait()
	if err := db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("b"))
		for i := range n {
			failing := i%10 == 3
			if failing != errors.Is(errs[i], boom) {
				t.Errorf("write %d: err = %v", i, errs[i])
			}
			if stored := b.Get(fmt.Appendf(nil, "k%d", i)) != nil; stored == failing {
				t.Errorf("write %d: stored %v, its function failed %v", i, stored, failing)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestCommitterPanicIsTheCallers: a function that panics panics on its
// caller's goroutine (run alone, as bbolt's Batch does), not on the
// committer's, and the others are committed.
func TestCommitterPanicIsTheCallers(t *testing.T) {
	db := openDB(t)
	c := New(db)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := c.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("b")).Put([]byte("ok"), []byte("v")) }); err != nil {
			t.Error(err)
		}
	})
	func() {
		defer func() {
			if p := recover(); p == nil {
				t.Error("the panicking write returned")
			}
		}()
		_ = c.Update(func(*bolt.Tx) error { panic("in a write") }) // it panics: no error to see
	}()
	wg.Wait()
	if err := db.View(func(tx *bolt.Tx) error {
		if tx.Bucket([]byte("b")).Get([]byte("ok")) == nil {
			t.Error("the other write was not committed")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkForward is a unique delivery's two writes (a claim, then its
// record, of the dedupe store's sizes) from 32 and 128 goroutines at once,
// on a file with fsync, grouped by the Committer or by bbolt's Batch with
// the 1 ms delay hookgate used before.
func BenchmarkForward(b *testing.B) {
	for _, conc := range []int{32, 128} {
		for _, mode := range []struct {
			name  string
			delay time.Duration
		}{{"group", 0}, {"batch1ms", time.Millisecond}} {
			b.Run(fmt.Sprintf("%s/c%d", mode.name, conc), func(b *testing.B) {
				db := openDB(b)
				write := New(db).Update
				if mode.delay > 0 {
					db.MaxBatchDelay = mode.delay
					write = db.Batch
				}
				claim, record := make([]byte, 40), make([]byte, 120)
				var seq atomic.Int64
				b.SetParallelism(conc / 2) // GOMAXPROCS is 2 on the bench machine
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						key := fmt.Appendf(nil, "k%d", seq.Add(1))
						for _, v := range [][]byte{claim, record} {
							if err := write(func(tx *bolt.Tx) error { return tx.Bucket([]byte("b")).Put(key, v) }); err != nil {
								b.Fatal(err)
							}
						}
					}
				})
			})
		}
	}
}

// BenchmarkCommitterAllocs holds the group commit's own allocations to a
// budget, and fails when it allocates more: a write through the Committer
// against the same write by bbolt's Update, one at a time, so the
// difference is the Committer's (its queue, its goroutine, its wait).
func BenchmarkCommitterAllocs(b *testing.B) {
	db := openDB(b)
	c := New(db)
	var key [8]byte
	op := Func(func(tx *bolt.Tx) error {
		key[7]++
		return tx.Bucket([]byte("b")).Put(key[:], key[:])
	})
	const budget = 1 // the drain's goroutine, started when no commit is in progress
	direct := testing.AllocsPerRun(50, func() {
		if err := db.Update(op); err != nil {
			b.Fatal(err)
		}
	})
	grouped := testing.AllocsPerRun(50, func() {
		if err := c.Do(op); err != nil {
			b.Fatal(err)
		}
	})
	if grouped-direct > budget {
		b.Fatalf("a write through the Committer allocates %.0f more than bbolt's Update (%.0f), over the budget of %d", grouped-direct, direct, budget)
	}
	b.ResetTimer()
	for range b.N {
		if err := c.Do(op); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(grouped-direct, "committer-allocs/op")
}
