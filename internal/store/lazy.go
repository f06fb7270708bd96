package store

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/dedupe/freshness"
	"github.com/hookgate/hookgate/sender"
)

// Lazy is the state as the handlers use it. It opens the store on first
// use, never before: `hookgate validate` must not take the bbolt file's
// lock from a running gateway, and a config without dedupe never opens
// it. Each call on the request path records its latency in a histogram,
// labelled with the backend, the namespace ("webhook": Claims has the
// others) and the operation, and what its write did, as does each write
// of the sender's queue (ObserveWrites): readiness reads it (Ready).
type Lazy struct {
	open     func() (*Conn, error)
	prefix   string
	backend  string
	once     sync.Once
	conn     *Conn
	opened   atomic.Pointer[Conn] // conn, once open: read without opening it
	st       State
	err      error
	duration metric.Float64Histogram
	attrs    [numOps][]metric.RecordOption // by operation, built once (a slice, so Record's variadic argument is not one more allocation)
	writes   writes                        // what the latest write did: readiness reads it (Ready)
}

// op is an operation whose latency is recorded, an index into opNames.
type op int

const (
	opClaim op = iota
	opRecord
	opRelease
	opGet
	opAcquireEntity
	opFinishEntity
	opKeep
	opKept
	numOps
)

// opNames are the operations' labels.
var opNames = [numOps]string{"claim", "record", "release", "get", "acquire_entity", "finish_entity", "keep", "kept"}

// NewLazy returns the state of the store open opens, on first use;
// prefix starts its Redis keys, and backend labels its latency.
func NewLazy(open func() (*Conn, error), prefix, backend string, duration metric.Float64Histogram) *Lazy {
	return &Lazy{open: open, prefix: prefix, backend: backend, duration: duration, attrs: opAttrs(backend, webhookNamespace)}
}

// opAttrs are the latency's labels of each operation in a namespace.
func opAttrs(backend, namespace string) (attrs [numOps][]metric.RecordOption) {
	for o, name := range opNames {
		attrs[o] = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(
			attribute.String("backend", backend), attribute.String("namespace", namespace), attribute.String("op", name)))}
	}
	return attrs
}

// Conn opens the store on first call, and returns it.
func (l *Lazy) Conn() (*Conn, error) {
	l.once.Do(func() {
		if l.conn, l.err = l.open(); l.err == nil {
			l.st = l.conn.State(l.prefix)
			l.opened.Store(l.conn)
		}
	})
	return l.conn, l.err
}

// ReplicationShortfalls is the open store's Conn.ReplicationShortfalls:
// nil while the store is not open (it does not open it).
func (l *Lazy) ReplicationShortfalls() map[string]int64 {
	if c := l.opened.Load(); c != nil {
		return c.ReplicationShortfalls()
	}
	return nil
}

// state returns the open state, and when the operation starts: done
// records its latency (a method and a time, not a closure, which would be
// an allocation per call).
func (l *Lazy) state() (State, time.Time, error) {
	if _, err := l.Conn(); err != nil {
		return nil, time.Time{}, err
	}
	return l.st, time.Now(), nil
}

// done records the latency of o, begun at start.
func (l *Lazy) done(ctx context.Context, o op, start time.Time) {
	l.duration.Record(ctx, time.Since(start).Seconds(), l.attrs[o]...)
}

func (l *Lazy) Claim(ctx context.Context, key string, c dedupe.Claim) (dedupe.ClaimResult, error) {
	s, start, err := l.state()
	if err != nil {
		return dedupe.ClaimResult{}, err
	}
	defer l.done(ctx, opClaim, start)
	res, err := s.Claim(ctx, key, c)
	l.writes.report(err, claimed(res))
	return res, err
}

func (l *Lazy) Record(ctx context.Context, key, token string, rec dedupe.Record, retention time.Duration, now time.Time) error {
	s, start, err := l.state()
	if err != nil {
		return err
	}
	defer l.done(ctx, opRecord, start)
	err = s.Record(ctx, key, token, rec, retention, now)
	l.writes.report(err, true)
	return err
}

func (l *Lazy) Release(ctx context.Context, key, token string) error {
	s, start, err := l.state()
	if err != nil {
		return err
	}
	defer l.done(ctx, opRelease, start)
	err = s.Release(ctx, key, token)
	l.writes.report(err, false) // it may have found another's claim, and written nothing
	return err
}

func (l *Lazy) Get(ctx context.Context, key string, now time.Time) (dedupe.Entry, error) {
	s, start, err := l.state()
	if err != nil {
		return dedupe.Entry{}, err
	}
	defer l.done(ctx, opGet, start)
	return s.Get(ctx, key, now)
}

func (l *Lazy) Forget(ctx context.Context, key string) (bool, error) {
	if _, err := l.Conn(); err != nil { // an operator's command: not timed
		return false, err
	}
	return l.st.Forget(ctx, key)
}

func (l *Lazy) GetEntity(ctx context.Context, entity string, now time.Time) (freshness.EntityState, error) {
	if _, err := l.Conn(); err != nil { // an operator's command: not timed
		return freshness.EntityState{}, err
	}
	return l.st.GetEntity(ctx, entity, now)
}

func (l *Lazy) AcquireEntity(ctx context.Context, entity string, a freshness.Acquire) (freshness.AcquireResult, error) {
	s, start, err := l.state()
	if err != nil {
		return freshness.AcquireResult{}, err
	}
	defer l.done(ctx, opAcquireEntity, start)
	res, err := s.AcquireEntity(ctx, entity, a)
	l.writes.report(err, res.Status == freshness.Acquired)
	return res, err
}

func (l *Lazy) FinishEntity(ctx context.Context, entity, token string, f freshness.Finish) error {
	s, start, err := l.state()
	if err != nil {
		return err
	}
	defer l.done(ctx, opFinishEntity, start)
	err = s.FinishEntity(ctx, entity, token, f)
	l.writes.report(err, false) // a watermark not raised and a lease not held write nothing
	return err
}

// Keep is State's Keep: a value kept once and for good.
func (l *Lazy) Keep(ctx context.Context, key string, value []byte) ([]byte, error) {
	s, start, err := l.state()
	if err != nil {
		return nil, err
	}
	defer l.done(ctx, opKeep, start)
	kept, err := s.Keep(ctx, key, value)
	l.writes.report(err, false) // it may have found a value kept, and written nothing
	return kept, err
}

// Kept is State's Kept.
func (l *Lazy) Kept(ctx context.Context, key string) ([]byte, error) {
	s, start, err := l.state()
	if err != nil {
		return nil, err
	}
	defer l.done(ctx, opKept, start)
	return s.Kept(ctx, key)
}

var _ State = (*Lazy)(nil)

// writes is what the latest write to the store did. Only the store's own
// failures count: a caller gone (context.Canceled) is no verdict. Nor is a
// call that answered without writing (a duplicate's claim, a claim lost, a
// superseded event, an empty lease): Redis out of memory under noeviction
// runs such a script all the same, so its success says nothing of the
// writes, and counting it would make a store that refuses every write
// ready again at the next duplicate.
type writes struct {
	failing atomic.Bool // the latest write failed
}

// report records a call's outcome: its failure, or its success when it
// wrote (wrote), else nothing.
func (w *writes) report(err error, wrote bool) {
	switch {
	case err == nil:
		if wrote && w.failing.Load() { // a load, not a store, on the hot path
			w.failing.Store(false)
		}
	case errors.Is(err, context.Canceled), errors.Is(err, dedupe.ErrClaimLost):
	default:
		w.failing.Store(true)
	}
}

// claimed reports whether a claim was written: the others found the key
// held or recorded.
func claimed(res dedupe.ClaimResult) bool {
	return res.Status == dedupe.Claimed || res.Status == dedupe.TookOver
}

// WriteDone records what a write to the store that does not go through l
// did: the sender's queue's (ObserveWrites). Ready judges by the latest
// write, the handlers' and these alike, so an instance that only sends is
// not ready while its queue's writes fail.
func (l *Lazy) WriteDone(err error) { l.writes.report(err, true) }

// ObserveWrites returns q, its writes on the sender's hot path (Enqueue,
// Lease when it moves leases, and Settle) reporting their outcome to done
// (Lazy.WriteDone). The rest, an operator's commands, report nothing.
func ObserveWrites(q sender.AuditedQueue, done func(error)) sender.AuditedQueue {
	return observedQueue{q, done}
}

// observedQueue is a queue whose hot-path writes report to done.
type observedQueue struct {
	sender.AuditedQueue
	done func(error)
}

// Enqueue reports a failure, and a success unless it was a duplicate,
// which wrote nothing (see Lease).
func (q observedQueue) Enqueue(ctx context.Context, e *sender.Envelope) (sender.EnqueueResult, error) {
	res, err := q.AuditedQueue.Enqueue(ctx, e)
	if err != nil || !res.Duplicate {
		q.done(err)
	}
	return res, err
}

// Lease reports a failure, and a success only when it leased something:
// an empty lease wrote nothing, and Redis out of memory under noeviction
// runs it all the same, so the worker's idle polls would otherwise mark
// the store ready again a second after an enqueue was refused. Ready's
// own probe write is what finds a recovered store.
func (q observedQueue) Lease(ctx context.Context, dest string, n int, now time.Time, lease time.Duration) ([]sender.Leased, error) {
	leased, err := q.AuditedQueue.Lease(ctx, dest, n, now, lease)
	if err != nil || len(leased) > 0 {
		q.done(err)
	}
	return leased, err
}

// Settle reports a failure, and a success unless it skipped every
// outcome (their leases lost), which wrote nothing.
func (q observedQueue) Settle(ctx context.Context, dest string, outcomes []sender.Outcome, now time.Time) (int, error) {
	skipped, err := q.AuditedQueue.Settle(ctx, dest, outcomes, now)
	if err != nil || skipped < len(outcomes) {
		q.done(err)
	}
	return skipped, err
}
