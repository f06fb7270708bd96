package store

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/dedupe"
)

// Ping reports whether the store answers now: a read transaction on the
// embedded file; on Redis a PING to the node (the master, with
// Sentinels), or to every master of a Cluster, since a Cluster with one
// master away fails the requests whose keys it holds. On Redis, ctx
// bounds it; a read transaction is not cancelable, and waits only for a
// remap of the file.
func (c *Conn) Ping(ctx context.Context) error {
	if c.db != nil {
		return c.db.View(func(*bolt.Tx) error { return nil })
	}
	if cc, ok := c.rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			return m.Ping(ctx).Err()
		})
	}
	return c.rdb.Ping(ctx).Err()
}

// Ready reports whether the store works: it answers (Conn.Ping), and
// its writes succeed. The handlers' writes through l (claims, records,
// releases, entity leases) and the sender queue's (enqueues, leases,
// settles: ObserveWrites) report what they did, a call that wrote nothing
// reporting only a failure (writes); when the latest verdict was a failure
// (a Redis out of memory under noeviction answers PING but refuses every
// write), Ready tries one write of its own, a claim on a key of its
// own released at once, and fails unless it succeeds. So a store whose
// writes work costs Ready no write, idle or not, and a store that has
// recovered is ready again at the next call, with no request needed.
func (l *Lazy) Ready(ctx context.Context) error {
	c, err := l.Conn()
	if err != nil {
		return err
	}
	if err := c.Ping(ctx); err != nil {
		return err
	}
	if !l.writes.failing.Load() {
		return nil
	}
	// A new key, so that the claim always writes; if the release fails,
	// the claim ends with its lease.
	const lease = 10 * time.Second
	key, token := "hookgate.readiness."+rand.Text(), rand.Text()
	if _, err := l.Claim(ctx, key, dedupe.Claim{Token: token, Lease: lease, Retention: lease, Now: time.Now()}); err != nil {
		return fmt.Errorf("writes fail: %w", err)
	}
	_ = l.Release(ctx, key, token) // the claim succeeded: writes work
	return nil
}
