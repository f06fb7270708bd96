package store

import (
	"context"

	"github.com/redis/go-redis/v9"
	bolt "go.etcd.io/bbolt"
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

// Ping opens the store if need be, and pings it (Conn.Ping).
func (l *Lazy) Ping(ctx context.Context) error {
	c, err := l.Conn()
	if err != nil {
		return err
	}
	return c.Ping(ctx)
}
