package boltqueue_test

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/internal/bolttest"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/boltqueue"
)

// BenchmarkHotPathBesideRedrives (a regression guard: with settle's trim
// walking every redrive's counts, redrives=10000 cost 2.3x redrives=0; the
// time index made them alike) is one envelope's enqueue, lease and settle
// (delivered), without fsync so that the CPU cost shows. With
// redrives=N the destination holds the counts of N redrives made within
// the retention (a redrive a minute for a week is 10080).
func BenchmarkHotPathBesideRedrives(b *testing.B) {
	for _, redrives := range []int{0, 10000} {
		b.Run(fmt.Sprintf("redrives=%d", redrives), func(b *testing.B) {
			db := bolttest.Open(b, &bolt.Options{NoSync: true})
			q, err := boltqueue.New(db, 24*time.Hour)
			if err != nil {
				b.Fatal(err)
			}
			now := time.Now()
			payload := []byte(`{"type":"reservation.confirmed","reservation_id":"r-1"}`)
			if _, err := q.Enqueue(b.Context(), &sender.Envelope{ID: "first", Destination: "d", CreatedAt: now, NextAt: now.Add(time.Hour), Payload: payload}); err != nil {
				b.Fatal(err)
			}
			if redrives > 0 {
				err = db.Update(func(tx *bolt.Tx) error {
					rc := tx.Bucket([]byte("sender")).Bucket([]byte("d")).Bucket([]byte("redrives"))
					if rc == nil {
						return fmt.Errorf("no redrives bucket: the layout changed")
					}
					for i := range redrives {
						v := make([]byte, 40)
						binary.BigEndian.PutUint64(v, 5)
						binary.BigEndian.PutUint64(v[32:], uint64(now.Add(-time.Duration(i)*time.Second).UnixMilli()))
						if err := rc.Put(fmt.Appendf(nil, "rd_%016x", i), v); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			i := 0
			for b.Loop() {
				i++
				id := fmt.Sprintf("evt_%d", i)
				if _, err := q.Enqueue(b.Context(), &sender.Envelope{ID: id, Destination: "d", CreatedAt: now, NextAt: now, Payload: payload}); err != nil {
					b.Fatal(err)
				}
				l, err := q.Lease(b.Context(), "d", 1, now, time.Minute)
				if err != nil || len(l) != 1 {
					b.Fatal(l, err)
				}
				if _, err := q.Settle(b.Context(), "d", []sender.Outcome{{Kind: sender.Delivered, ID: id, LeaseUntil: l[0].LeaseUntil}}, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
