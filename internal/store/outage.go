package store

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// outage logs a Redis outage without flooding the log: a warning at the
// first failed connection, then at most one a minute with the count of
// failures since the last, and one line when Redis answers again. Every
// connection go-redis opens, for a request, a worker or its own retries,
// goes through its dial hook.
type outage struct {
	logger *slog.Logger
	addrs  []string
	now    func() time.Time

	mu       sync.Mutex
	answered bool // ever: an outage before the first connection is "at start"
	down     bool
	since    time.Time // when the outage began
	logged   time.Time // when its last line was logged
	failures int       // since the last line
}

// outageEvery is how often an outage that lasts is logged again.
const outageEvery = time.Minute

func newOutage(logger *slog.Logger, addrs []string, now func() time.Time) *outage {
	return &outage{logger: logger, addrs: addrs, now: now}
}

// failed records a failed connection.
func (o *outage) failed(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	if !o.down {
		o.down, o.since, o.logged, o.failures = true, now, now, 0
		msg := "store: Redis does not answer; until it does, webhooks get 503 store_unavailable and the sender waits"
		if !o.answered {
			msg = "store: Redis does not answer at start; until it does, webhooks get 503 store_unavailable and the sender waits"
		}
		o.logger.Warn(msg, "backend", "redis", "addrs", o.addrs, "answered", false, "error", err)
		return
	}
	o.failures++
	if now.Sub(o.logged) >= outageEvery {
		o.logger.Warn("store: Redis still does not answer",
			"backend", "redis", "addrs", o.addrs, "answered", false, "failures", o.failures,
			"down_for", now.Sub(o.since).Round(time.Second).String(), "error", err)
		o.logged, o.failures = now, 0
	}
}

// connected records a connection made: the end of an outage, if one was
// on.
func (o *outage) connected() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.answered = true
	if !o.down {
		return
	}
	o.down = false
	o.logger.Info("store: Redis answers now",
		"backend", "redis", "addrs", o.addrs, "answered", true, "failures", o.failures,
		"down_for", o.now().Sub(o.since).Round(time.Second).String())
}

// isDown reports whether an outage is on, and logged.
func (o *outage) isDown() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.down
}

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
