package boltqueue

// The envelopes not yet settled: the leased and due indexes, read in
// score order, then those that wait behind their entity's head.

import (
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/sender"
)

// Pending implements sender.Queue: the leased index (by lease end), then
// the due index (by when due), then the waiting envelopes entity by
// entity (pendingWaiting), one read transaction.
func (q *Queue) Pending(ctx context.Context, name string, f sender.PendingFilter, limit int) ([]*sender.Meta, error) {
	var out []*sender.Meta
	looked := 0
	err := q.view(name, func(d *dest) error {
		if d == nil {
			return nil
		}
		for _, ix := range []struct {
			b     *bolt.Bucket
			state sender.State
		}{{d.leased, sender.StateLeased}, {d.due, sender.StateQueued}} {
			c := ix.b.Cursor()
			for k, _ := c.First(); k != nil && len(out) < limit && looked < sender.MaxPendingScan; k, _ = c.Next() {
				looked++
				if err := ctx.Err(); err != nil {
					return err
				}
				id := string(k[8:])
				v := d.meta.Get(k[8:])
				if v == nil {
					continue // a stale index entry
				}
				m, err := sender.UnmarshalMeta(name, id, v)
				if err != nil {
					m = sender.BrokenMeta(name, id, err)
				}
				if !f.Match(m) {
					continue
				}
				m.State, m.NextAt = ix.state, time.UnixMilli(scoreOf(k))
				out = append(out, m)
			}
		}
		var err error
		out, err = d.pendingWaiting(ctx, f, out, looked, limit)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("bolt pending: %w", err)
	}
	return out, nil
}
