package store

import (
	"context"
	"errors"
	"net"

	"github.com/redis/go-redis/v9"
)

// sendScriptsOnce keeps a Cluster client from sending a script twice.
// MaxRetries (RedisOptions) is each node's retry; the Cluster client has a
// retry loop of its own, bounded by MaxRedirects, which follows MOVED and
// ASK (those it must keep) and also resends a command whose reply timed
// out. A script that ran but answered late would run again: so once a
// script has been sent and its outcome is unknown, the next try answers
// that outcome without sending it.
func sendScriptsOnce(c *redis.ClusterClient) {
	c.AddHook(scriptCall{})
	c.OnNewNode(func(node *redis.Client) { node.AddHook(scriptSend{}) })
}

// sentKey holds, in a script call's context, what its send did.
type sentKey struct{}

// sent is what a script call's send did: err, when it may have run with
// its reply lost.
type sent struct{ err error }

// scriptCall marks each script call, across the Cluster client's tries.
type scriptCall struct{}

func (scriptCall) DialHook(next redis.DialHook) redis.DialHook { return next }

func (scriptCall) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch cmd.Name() {
		case "eval", "evalsha", "fcall":
			ctx = context.WithValue(ctx, sentKey{}, new(sent))
		}
		return next(ctx, cmd)
	}
}

func (scriptCall) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// scriptSend sends a marked script call to a node at most once, unless
// the node answered that it did not run it.
type scriptSend struct{}

func (scriptSend) DialHook(next redis.DialHook) redis.DialHook { return next }

func (scriptSend) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		s, _ := ctx.Value(sentKey{}).(*sent)
		if s == nil {
			return next(ctx, cmd)
		}
		if s.err != nil {
			cmd.SetErr(s.err)
			return s.err
		}
		err := next(ctx, cmd)
		if mayHaveRun(err) {
			s.err = err
		}
		return err
	}
}

func (scriptSend) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// mayHaveRun reports whether a command that failed with err may have run:
// its reply was lost (a timeout, a connection broken after the write). An
// answer from Redis (MOVED, ASK, TRYAGAIN, the script's own error) says
// what happened; a failed dial or a pool timeout sent nothing.
func mayHaveRun(err error) bool {
	var rerr redis.Error
	var oerr *net.OpError
	switch {
	case err == nil, errors.As(err, &rerr), errors.Is(err, redis.ErrPoolTimeout),
		errors.As(err, &oerr) && oerr.Op == "dial":
		return false
	}
	return true
}
