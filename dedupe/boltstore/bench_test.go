package boltstore

import (
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/boltfile"
	"github.com/hookgate/hookgate/internal/bolttest"
)

// BenchmarkClaimRecord is a unique delivery's two store calls, a claim and
// then its record, from 64 and 128 goroutines at once on a real file with
// fsync, as bench/run.sh's file-unique runs make them: keys as its load
// generator makes them (seq) or random ones (rand). Besides ns/op (wall
// time over the goroutines: the disk's, on a shared machine mostly) it
// reports pairs/s, the p99 of each call, the process's CPU per pair (user
// and system, so the kernel's share of each fsync'd commit counts), and
// commits and page writes per pair.
//
// The variants are bbolt settings side by side: the file as boltfile.OpenFile opens
// it (open), and candidates. With -count, a run interleaves them.
func BenchmarkClaimRecord(b *testing.B) {
	for _, keys := range []string{"seq", "rand"} {
		for _, conc := range []int{64, 128} {
			for _, v := range benchVariants {
				b.Run(fmt.Sprintf("%s/c%d/%s", keys, conc, v.name), func(b *testing.B) {
					opts := boltfile.Options(time.Second, false)
					v.set(opts)
					db := bolttest.Open(b, opts)
					s, err := New(db, Options{PurgeEvery: time.Hour})
					if err != nil {
						b.Fatal(err)
					}
					defer func() { _ = s.Close() }()
					runPairs(b, s, conc, keys == "rand")
				})
			}
		}
	}
}

// benchVariants are the bbolt settings BenchmarkClaimRecord compares.
var benchVariants = []struct {
	name string
	set  func(*bolt.Options)
}{
	{"open", func(*bolt.Options) {}},
	{"arraylist", func(o *bolt.Options) { o.FreelistType = bolt.FreelistArrayType }},
	{"mmap64m", func(o *bolt.Options) { o.InitialMmapSize = 64 << 20 }},
	{"page16k", func(o *bolt.Options) { o.PageSize = 16 << 10 }},
}

var benchRecord = dedupe.Record{Status: 200, Header: map[string][]string{"Content-Type": {"application/json"}}, Body: []byte(`{"enrolled":true}`)}

func runPairs(b *testing.B, s *Store, conc int, random bool) {
	ctx := b.Context()
	keys := make([]string, b.N)
	tokens := make([]string, b.N)
	prefix := "msg_" + strconv.FormatInt(time.Now().UnixNano(), 10) + "_"
	for i := range keys {
		if random {
			var r [12]byte
			for j := range r {
				r[j] = byte(rand.Uint32())
			}
			keys[i] = "msg_" + hex.EncodeToString(r[:])
		} else {
			keys[i] = prefix + strconv.Itoa(i+1)
		}
		tokens[i] = fmt.Sprintf("%032x", rand.Uint64())
	}
	fp := dedupe.FingerprintOf([]byte("body"))
	var next atomic.Int64
	claims := make([][]time.Duration, conc)
	records := make([][]time.Duration, conc)
	var wg sync.WaitGroup
	tx0, writes0 := txid(b, s.db), pageWrites(s.db)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0, start := cpuTime(), time.Now()
	for g := range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				key, token := keys[i], tokens[i]
				t0 := time.Now()
				res, err := s.Claim(ctx, key, dedupe.Claim{Fingerprint: fp, Token: token, Lease: 30 * time.Second, Retention: dedupe.DefaultRetention, Now: t0})
				t1 := time.Now()
				if err != nil || res.Status != dedupe.Claimed {
					b.Errorf("claim: %v %v", res.Status, err)
					return
				}
				if err := s.Record(ctx, key, token, benchRecord, dedupe.DefaultRetention, t0); err != nil {
					b.Errorf("record: %v", err)
					return
				}
				t2 := time.Now()
				claims[g] = append(claims[g], t1.Sub(t0))
				records[g] = append(records[g], t2.Sub(t1))
			}
		})
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(n/elapsed.Seconds(), "pairs/s")
	b.ReportMetric(p99(claims), "claim-p99-ms")
	b.ReportMetric(p99(records), "record-p99-ms")
	b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-µs/pair")
	b.ReportMetric(float64(txid(b, s.db)-tx0)/n, "commits/pair")
	b.ReportMetric(float64(pageWrites(s.db)-writes0)/n, "pagewrites/pair")
}

// txid is the id of the last committed write transaction.
func txid(b *testing.B, db *bolt.DB) int {
	tx, err := db.Begin(false)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	return tx.ID()
}

// pageWrites is how many pages db's transactions wrote.
func pageWrites(db *bolt.DB) int64 {
	st := db.Stats()
	return st.TxStats.GetWrite()
}

// cpuTime is the process's CPU time, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func p99(per [][]time.Duration) float64 {
	all := slices.Concat(per...)
	if len(all) == 0 {
		return 0
	}
	slices.Sort(all)
	return float64(all[len(all)*99/100]) / float64(time.Millisecond)
}
