package redisqueue

// The envelopes not yet settled: the leased ZSET, the ready LIST, the
// due ZSET and the entities' LISTs, read in that order, and their
// records.

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/sender"
)

// pendingChunk is the fewest IDs Pending reads of a key per call: a
// filter may pass over many.
const pendingChunk = 256

// pendingKey is one key Pending reads, and the state of what it holds.
type pendingKey struct {
	key   string
	list  bool // the ready LIST; else a ZSET scored by unix ms
	state sender.State
}

// read queues on c the read of n IDs from offset on.
func (p pendingKey) read(ctx context.Context, c redis.Cmdable, offset, n int) redis.Cmder {
	stop := int64(offset + n - 1)
	if p.list {
		return c.LRange(ctx, p.key, int64(offset), stop)
	}
	return c.ZRangeWithScores(ctx, p.key, int64(offset), stop)
}

// idsOf is what a read answered: the IDs, and their scores (nil for the
// list).
func idsOf(cmd redis.Cmder) ([]string, []float64, error) {
	switch c := cmd.(type) {
	case *redis.StringSliceCmd:
		ids, err := c.Result()
		return ids, nil, err
	case *redis.ZSliceCmd:
		zs, err := c.Result()
		ids, scores := make([]string, len(zs)), make([]float64, len(zs))
		for i, z := range zs {
			ids[i], _ = z.Member.(string)
			scores[i] = z.Score
		}
		return ids, scores, err
	}
	return nil, nil, fmt.Errorf("unexpected reply %T", cmd)
}

// Pending implements sender.Queue. The first slice of each key is read
// in one MULTI, so that a short list is a snapshot; a walk past it reads
// on a slice at a time, and an envelope that moves meanwhile (leased,
// settled) may be left out of it. An ID whose record is gone (settled
// meanwhile) is skipped; an ID is listed once.
func (q *Queue) Pending(ctx context.Context, dest string, f sender.PendingFilter, limit int) ([]*sender.Meta, error) {
	if limit <= 0 {
		return nil, nil
	}
	k := keysOf(q.prefix, dest)
	keys := []pendingKey{
		{key: k.leased, state: sender.StateLeased},
		{key: k.ready, list: true, state: sender.StateQueued},
		{key: k.due, state: sender.StateQueued},
	}
	chunk := max(limit, pendingChunk)
	first := make([]redis.Cmder, len(keys))
	_, err := q.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for i, pk := range keys {
			first[i] = pk.read(ctx, p, 0, chunk)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redis pending: %w", err)
	}
	var out []*sender.Meta
	seen := map[string]bool{}
	looked := 0
	for i, pk := range keys {
		cmd := first[i]
		for offset := 0; len(out) < limit && looked < sender.MaxPendingScan; offset += chunk {
			if offset > 0 {
				cmd = pk.read(ctx, q.rdb, offset, chunk)
			}
			ids, scores, err := idsOf(cmd)
			if err != nil {
				return nil, fmt.Errorf("redis pending: %w", err)
			}
			if len(ids) == 0 {
				break
			}
			looked += len(ids)
			raws, err := q.rdb.HMGet(ctx, k.meta, ids...).Result()
			if err != nil {
				return nil, fmt.Errorf("redis pending: %w", err)
			}
			for j, id := range ids {
				raw, ok := str(raws[j])
				if !ok || seen[id] || len(out) == limit {
					continue // settled meanwhile, or listed already
				}
				m, err := sender.UnmarshalMeta(dest, id, []byte(raw))
				if err != nil {
					m = sender.BrokenMeta(dest, id, err)
				}
				if !f.Match(m) {
					continue
				}
				seen[id] = true
				m.State = pk.state
				if scores != nil {
					m.NextAt = time.UnixMilli(int64(scores[j]))
				}
				out = append(out, m)
			}
			if len(ids) < chunk {
				break
			}
		}
	}
	return q.pendingWaiting(ctx, dest, k, f, out, seen, looked, limit)
}
