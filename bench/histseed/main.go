// Command histseed writes a delivery history into a stopped gateway's
// embedded store: N envelopes of one destination, each enqueued, leased
// and settled delivered (one attempt, 200), settled over the last N
// milliseconds, without their payloads kept. bench/history_export.sh and
// the export integration test seed the 100,000 entries they export so,
// in seconds rather than by delivering them.
//
//	histseed -db <data dir>/caddy/hookgate/state.db -n 100000 -dest enrollment
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/boltqueue"
)

func main() {
	path := flag.String("db", "", "the state.db to write (created with its directory)")
	n := flag.Int("n", 100000, "envelopes")
	dest := flag.String("dest", "enrollment", "their destination")
	keep := flag.Duration("keep", 168*time.Hour, "the history kept (the gateway's history)")
	flag.Parse()
	if *path == "" {
		log.Fatal("histseed: -db is required")
	}
	if err := seed(context.Background(), *path, *dest, *n, *keep); err != nil {
		log.Fatal("histseed: ", err)
	}
}

// batch is how many envelopes one lease and one settle move.
const batch = 1000

func seed(ctx context.Context, path, dest string, n int, keep time.Duration) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: true, Timeout: 5 * time.Second})
	if err != nil {
		return err
	}
	q, err := boltqueue.New(db, keep)
	if err != nil {
		return err
	}
	q.KeepHistory(sender.History{Keep: keep})
	start := time.Now().Add(-time.Duration(n) * time.Millisecond)
	for from := 0; from < n; from += batch {
		to := min(from+batch, n)
		var wg sync.WaitGroup
		errs := make(chan error, to-from)
		for i := from; i < to; i++ {
			wg.Go(func() {
				at := start.Add(time.Duration(i) * time.Millisecond)
				e := &sender.Envelope{ID: fmt.Sprintf("hist-%06d", i), Destination: dest, EventType: "reservation.confirmed",
					Entity: fmt.Sprintf("r-%d", i%1000), Payload: fmt.Appendf(nil, `{"type":"reservation.confirmed","n":%d}`, i),
					CreatedAt: at, NextAt: at}
				if _, err := q.Enqueue(ctx, e); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return err
		}
		at := start.Add(time.Duration(to) * time.Millisecond)
		leased, err := q.Lease(ctx, dest, to-from, time.Now(), time.Hour)
		if err != nil {
			return err
		}
		out := make([]sender.Outcome, 0, len(leased))
		for _, l := range leased {
			e := l.Envelope
			e.Attempts++
			e.LastStatus = 200 // as the sender settles a delivery
			e.Log = append(e.Log, sender.Attempt{At: at, Status: 200, Latency: 3 * time.Millisecond})
			out = append(out, sender.Outcome{Kind: sender.Delivered, ID: e.ID, LeaseUntil: l.LeaseUntil, Envelope: e})
		}
		if _, err := q.Settle(ctx, dest, out, at); err != nil {
			return err
		}
	}
	if err := db.Sync(); err != nil {
		return err
	}
	return db.Close()
}
