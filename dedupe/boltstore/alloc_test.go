package boltstore

import (
	"strconv"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/boltfile"
	"github.com/hookgate/hookgate/internal/bolttest"
)

// BenchmarkStoreAllocs holds the store's calls to allocation budgets, and
// fails when one allocates more: a replay (a claim answered from a read
// transaction, with its record decoded), and the writes of a claim and of
// a record as the group commit applies them (in an open transaction, so
// bbolt's commit, shared by the group, is not counted; its searches are).
// The group commit's own cost is internal/boltcommit's
// BenchmarkCommitterAllocs.
func BenchmarkStoreAllocs(b *testing.B) {
	db := bolttest.Open(b, boltfile.Options(time.Second, false))
	s, err := New(db, Options{PurgeEvery: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	ctx := b.Context()
	fp := dedupe.FingerprintOf([]byte("body"))
	now := time.Now()
	const token = "0123456789abcdef0123456789abcdef"
	claim := func(key string) dedupe.Claim {
		return dedupe.Claim{Fingerprint: fp, Token: token, Lease: 30 * time.Second, Retention: dedupe.DefaultRetention, Now: now}
	}
	if _, err := s.Claim(ctx, "recorded", claim("recorded")); err != nil {
		b.Fatal(err)
	}
	if err := s.Record(ctx, "recorded", token, benchRecord, dedupe.DefaultRetention, now); err != nil {
		b.Fatal(err)
	}
	// Keys made beforehand: the loadgen's shape, claimed as 1, 2, ... and
	// recorded as -1, -2, ...
	keys := map[int]string{}
	key := func(i int) string {
		k, ok := keys[i]
		if !ok {
			k = "msg_1764612345678901234_" + strconv.Itoa(i)
			keys[i] = k
		}
		return k
	}
	rec := dedupe.MarshalRecord(benchRecord)

	for _, c := range []struct {
		name   string
		budget float64
		// run makes the call; in a write, tx is an open write transaction.
		write bool
		run   func(tx *bolt.Tx, i int) error
	}{
		{"replay", 14, false, func(_ *bolt.Tx, _ int) error {
			res, err := s.Claim(ctx, "recorded", dedupe.Claim{Fingerprint: fp, Token: "another", Lease: time.Second, Retention: time.Hour, Now: now})
			if err == nil && res.Status != dedupe.Recorded {
				b.Fatalf("replay: %v", res.Status)
			}
			return err
		}},
		{"claim-write", 6, true, func(tx *bolt.Tx, i int) error {
			return (&claimOp{key: key(i), c: claim(key(i))}).Apply(tx)
		}},
		{"record-write", 7, true, func(tx *bolt.Tx, i int) error {
			op := &recordOp{key: key(-i), token: token, rec: rec, expires: ms(now.Add(time.Hour))}
			if err := op.Apply(tx); err != nil || op.lost {
				b.Fatalf("record: lost %v, %v", op.lost, err)
			}
			return nil
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var tx *bolt.Tx
			if c.write {
				if tx, err = db.Begin(true); err != nil {
					b.Fatal(err)
				}
				defer func() { _ = tx.Rollback() }()
				for i := 1; i <= b.N+101; i++ {
					key(i)
					if err := (&claimOp{key: key(-i), c: claim(key(-i))}).Apply(tx); err != nil {
						b.Fatal(err)
					}
				}
			}
			i := 0
			call := func() {
				i++
				if err := c.run(tx, i); err != nil {
					b.Fatal(err)
				}
			}
			got := testing.AllocsPerRun(100, call)
			if got > c.budget {
				b.Fatalf("%s: %.1f allocations a call, over its budget of %.0f", c.name, got, c.budget)
			}
			b.ResetTimer()
			for range b.N {
				call()
			}
			b.ReportMetric(got, "allocs/call")
		})
	}
}
