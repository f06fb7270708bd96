package store

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/hookgate/hookgate/dedupe"
)

// Lazy is the state as the handlers use it. It opens the store on first
// use, never before: `hookgate validate` must not take the bbolt file's
// lock from a running gateway, and a config without dedupe never opens
// it. Each call on the request path records its latency in a histogram, labelled with the
// backend and the operation.
type Lazy struct {
	open     func() (*Conn, error)
	prefix   string
	once     sync.Once
	conn     *Conn
	st       State
	err      error
	duration metric.Float64Histogram
	attrs    map[string][]metric.RecordOption // by operation, built once (a slice, so Record's variadic argument is not one more allocation)
}

// NewLazy returns the state of the store open opens, on first use;
// prefix starts its Redis keys, and backend labels its latency.
func NewLazy(open func() (*Conn, error), prefix, backend string, duration metric.Float64Histogram) *Lazy {
	l := &Lazy{open: open, prefix: prefix, duration: duration, attrs: map[string][]metric.RecordOption{}}
	for _, op := range []string{"claim", "record", "release", "get", "acquire_entity", "finish_entity"} {
		l.attrs[op] = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("backend", backend), attribute.String("op", op)))}
	}
	return l
}

// Conn opens the store on first call, and returns it.
func (l *Lazy) Conn() (*Conn, error) {
	l.once.Do(func() {
		if l.conn, l.err = l.open(); l.err == nil {
			l.st = l.conn.State(l.prefix)
		}
	})
	return l.conn, l.err
}

// Unwrap returns the state l decorates, opening the store if need be;
// nil if it does not open.
func (l *Lazy) Unwrap() State {
	if _, err := l.Conn(); err != nil {
		return nil
	}
	return l.st
}

// state returns the open state, and a function that records the
// operation's latency when the operation is done.
func (l *Lazy) state(ctx context.Context, op string) (State, func(), error) {
	if _, err := l.Conn(); err != nil {
		return nil, nil, err
	}
	start := time.Now()
	return l.st, func() { l.duration.Record(ctx, time.Since(start).Seconds(), l.attrs[op]...) }, nil
}

func (l *Lazy) Claim(ctx context.Context, key string, c dedupe.Claim) (dedupe.ClaimResult, error) {
	s, done, err := l.state(ctx, "claim")
	if err != nil {
		return dedupe.ClaimResult{}, err
	}
	defer done()
	return s.Claim(ctx, key, c)
}

func (l *Lazy) Record(ctx context.Context, key, token string, rec dedupe.Record, retention time.Duration, now time.Time) error {
	s, done, err := l.state(ctx, "record")
	if err != nil {
		return err
	}
	defer done()
	return s.Record(ctx, key, token, rec, retention, now)
}

func (l *Lazy) Release(ctx context.Context, key, token string) error {
	s, done, err := l.state(ctx, "release")
	if err != nil {
		return err
	}
	defer done()
	return s.Release(ctx, key, token)
}

func (l *Lazy) Get(ctx context.Context, key string, now time.Time) (dedupe.Entry, error) {
	s, done, err := l.state(ctx, "get")
	if err != nil {
		return dedupe.Entry{}, err
	}
	defer done()
	return s.Get(ctx, key, now)
}

func (l *Lazy) Forget(ctx context.Context, key string) (bool, error) {
	if _, err := l.Conn(); err != nil { // an operator's command: not timed
		return false, err
	}
	return l.st.Forget(ctx, key)
}

func (l *Lazy) GetEntity(ctx context.Context, entity string, now time.Time) (dedupe.EntityState, error) {
	if _, err := l.Conn(); err != nil { // an operator's command: not timed
		return dedupe.EntityState{}, err
	}
	return l.st.GetEntity(ctx, entity, now)
}

func (l *Lazy) AcquireEntity(ctx context.Context, entity string, a dedupe.Acquire) (dedupe.AcquireResult, error) {
	s, done, err := l.state(ctx, "acquire_entity")
	if err != nil {
		return dedupe.AcquireResult{}, err
	}
	defer done()
	return s.AcquireEntity(ctx, entity, a)
}

func (l *Lazy) FinishEntity(ctx context.Context, entity, token string, f dedupe.Finish) error {
	s, done, err := l.state(ctx, "finish_entity")
	if err != nil {
		return err
	}
	defer done()
	return s.FinishEntity(ctx, entity, token, f)
}

var _ State = (*Lazy)(nil)
