package store

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	outagelog "github.com/hookgate/hookgate/internal/outage"
)

// outage logs a Redis outage without flooding the log: a warning at the
// first failed connection, then at most one a minute with the count of
// failures since the last, and one line when Redis answers again (the
// policy of internal/outage, which the receiver's handlers follow too).
// Every connection go-redis opens, for a request, a worker or its own
// retries, goes through its dial hook.
type outage struct {
	logger *slog.Logger
	addrs  []string
	run    *outagelog.Tracker

	answered atomic.Bool // ever: an outage before the first connection is "at start"
}

func newOutage(logger *slog.Logger, addrs []string, now func() time.Time) *outage {
	return &outage{logger: logger, addrs: addrs, run: outagelog.New(now)}
}

// failed records a failed connection.
func (o *outage) failed(err error) {
	l, ok := o.run.Failed()
	switch {
	case !ok:
	case l.First:
		msg := "store: Redis does not answer; until it does, webhooks get 503 store_unavailable and the sender waits"
		if !o.answered.Load() {
			msg = "store: Redis does not answer at start; until it does, webhooks get 503 store_unavailable and the sender waits"
		}
		o.logger.Warn(msg, "backend", "redis", "addrs", o.addrs, "answered", false, "error", err)
	default:
		o.logger.Warn("store: Redis still does not answer",
			"backend", "redis", "addrs", o.addrs, "answered", false, "failures", l.Failures,
			"down_for", l.DownFor.String(), "error", err)
	}
}

// connected records a connection made: the end of an outage, if one was
// on.
func (o *outage) connected() {
	o.answered.Store(true)
	if l, ok := o.run.Recovered(); ok {
		o.logger.Info("store: Redis answers now",
			"backend", "redis", "addrs", o.addrs, "answered", true, "failures", l.Failures,
			"down_for", l.DownFor.String())
	}
}

// isDown reports whether an outage is on, and logged.
func (o *outage) isDown() bool { return o.run.Down() }

// watch makes every connection rdb opens report to o.
func (o *outage) watch(rdb redis.UniversalClient) {
	if c, ok := rdb.(*redis.ClusterClient); ok {
		c.OnNewNode(func(node *redis.Client) { node.AddHook(outageHook{o}) })
		return
	}
	rdb.AddHook(outageHook{o})
}

// outageHook is a go-redis hook that reports each dial's outcome.
type outageHook struct{ o *outage }

func (h outageHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		switch {
		case err == nil:
			h.o.connected()
		case !errors.Is(err, context.Canceled): // a caller gone is no outage
			h.o.failed(err)
		}
		return conn, err
	}
}

func (outageHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (outageHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
