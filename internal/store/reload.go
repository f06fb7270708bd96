package store

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// reloadOnNodeFailure makes a Cluster client reload its slot map when a
// node fails to answer. go-redis reloads it on MOVED, ASK and READONLY,
// and otherwise once a minute: after a master dies, every call to its
// slots failed (connection refused) until that minute was up, long after
// the Cluster had promoted its replica. A reload is one CLUSTER SLOTS;
// go-redis runs one at a time, at most every 200 ms, however many ask.
func reloadOnNodeFailure(c *redis.ClusterClient) {
	c.OnNewNode(func(node *redis.Client) { node.AddHook(reloadHook{c}) })
}

// reloadHook reloads c's slot map after a node's call or pipeline failed
// for want of an answer: a failed dial, a broken connection, a timeout.
type reloadHook struct{ c *redis.ClusterClient }

func (h reloadHook) failed(err error) {
	var rerr redis.Error
	if err != nil && !errors.As(err, &rerr) && !errors.Is(err, context.Canceled) {
		h.c.ReloadState(context.Background())
	}
}

func (reloadHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h reloadHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.failed(err)
		return err
	}
}

func (h reloadHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.failed(err)
		return err
	}
}
