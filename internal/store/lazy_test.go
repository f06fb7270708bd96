package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/dedupe/freshness"
	"github.com/hookgate/hookgate/sender"
	"go.opentelemetry.io/otel/metric/noop"
)

// leaseOnly is a queue whose Lease answers what it is told and whose
// Enqueue finds a duplicate: the rest of the interface is never called.
type leaseOnly struct {
	sender.AuditedQueue
	leased []sender.Leased
	err    error
}

func (q leaseOnly) Enqueue(context.Context, *sender.Envelope) (sender.EnqueueResult, error) {
	return sender.EnqueueResult{Duplicate: true}, nil
}

func (q leaseOnly) Lease(context.Context, string, int, time.Time, time.Duration) ([]sender.Leased, error) {
	return q.leased, q.err
}

// TestObservedLease: a lease that leased nothing, like a duplicate
// enqueue, is no verdict on the store's writes (Redis out of memory runs
// it all the same); one that leased something is a write that worked, and
// a failed one a write that failed.
func TestObservedLease(t *testing.T) {
	refused := errors.New("OOM command not allowed")
	for _, tc := range []struct {
		name   string
		q      leaseOnly
		report []error
	}{
		{"empty", leaseOnly{}, nil},
		{"leased", leaseOnly{leased: make([]sender.Leased, 1)}, []error{nil}},
		{"failed", leaseOnly{err: refused}, []error{refused}},
	} {
		var got []error
		q := ObserveWrites(tc.q, func(err error) { got = append(got, err) })
		_, _ = q.Lease(t.Context(), "d", 1, time.Now(), time.Second)
		_, _ = q.Enqueue(t.Context(), &sender.Envelope{}) // a duplicate: no verdict either
		if len(got) != len(tc.report) || (len(got) == 1 && !errors.Is(got[0], tc.report[0])) {
			t.Errorf("%s: reported %v, want %v", tc.name, got, tc.report)
		}
	}
}

// answers is a state whose writes answer what it is told: a claim's
// status, an entity's status, or err. The rest is never called.
type answers struct {
	State
	claim   dedupe.ClaimStatus
	acquire freshness.AcquireStatus
	err     error
}

func (a answers) Claim(context.Context, string, dedupe.Claim) (dedupe.ClaimResult, error) {
	return dedupe.ClaimResult{Status: a.claim}, a.err
}

func (a answers) Release(context.Context, string, string) error { return a.err }

func (a answers) Record(context.Context, string, string, dedupe.Record, time.Duration, time.Time) error {
	return a.err
}

func (a answers) AcquireEntity(context.Context, string, freshness.Acquire) (freshness.AcquireResult, error) {
	return freshness.AcquireResult{Status: a.acquire}, a.err
}

func (a answers) FinishEntity(context.Context, string, string, freshness.Finish) error { return a.err }

// TestWritesVerdicts: after a refused write, only a call that wrote marks
// the store's writes as working again. A duplicate's claim, a superseded
// or busy entity, a release or a finish may have written nothing, and a
// Redis out of memory under noeviction answers them all the same, so they
// left /healthz ready while every write was refused (a superseded event
// did, through the real gateway: TestReadyAfterReadOnlyAnswers).
func TestWritesVerdicts(t *testing.T) {
	hist, err := noop.NewMeterProvider().Meter("t").Float64Histogram("d")
	if err != nil {
		t.Fatal(err)
	}
	refused := errors.New("OOM command not allowed")
	ctx, now := t.Context(), time.Now()
	for _, tc := range []struct {
		name  string
		state answers
		call  func(l *Lazy)
		ready bool // the call is a verdict that writes work
	}{
		{"claimed", answers{claim: dedupe.Claimed}, func(l *Lazy) { _, _ = l.Claim(ctx, "k", dedupe.Claim{}) }, true},
		{"took over", answers{claim: dedupe.TookOver}, func(l *Lazy) { _, _ = l.Claim(ctx, "k", dedupe.Claim{}) }, true},
		{"recorded", answers{}, func(l *Lazy) { _ = l.Record(ctx, "k", "t", dedupe.Record{}, time.Hour, now) }, true},
		{"acquired", answers{acquire: freshness.Acquired}, func(l *Lazy) { _, _ = l.AcquireEntity(ctx, "e", freshness.Acquire{}) }, true},
		{"a duplicate in flight", answers{claim: dedupe.InFlight}, func(l *Lazy) { _, _ = l.Claim(ctx, "k", dedupe.Claim{}) }, false},
		{"a duplicate recorded", answers{claim: dedupe.Recorded}, func(l *Lazy) { _, _ = l.Claim(ctx, "k", dedupe.Claim{}) }, false},
		{"superseded", answers{acquire: freshness.Superseded}, func(l *Lazy) { _, _ = l.AcquireEntity(ctx, "e", freshness.Acquire{}) }, false},
		{"busy", answers{acquire: freshness.Busy}, func(l *Lazy) { _, _ = l.AcquireEntity(ctx, "e", freshness.Acquire{}) }, false},
		{"released", answers{}, func(l *Lazy) { _ = l.Release(ctx, "k", "t") }, false},
		{"finished", answers{}, func(l *Lazy) { _ = l.FinishEntity(ctx, "e", "t", freshness.Finish{}) }, false},
		{"claim lost", answers{err: dedupe.ErrClaimLost}, func(l *Lazy) { _ = l.Record(ctx, "k", "t", dedupe.Record{}, time.Hour, now) }, false},
	} {
		l := &Lazy{duration: hist, attrs: opAttrs("fake", webhookNamespace), st: tc.state}
		l.once.Do(func() {}) // open: the state is tc.state
		l.writes.report(refused, true)
		tc.call(l)
		if got := !l.writes.failing.Load(); got != tc.ready {
			t.Errorf("%s after a refused write: writes work %v, want %v", tc.name, got, tc.ready)
		}
		l.writes.report(refused, true)
		tc.state.err = refused
		l.st = tc.state
		tc.call(l)
		if !l.writes.failing.Load() {
			t.Errorf("%s refused: writes work", tc.name)
		}
	}
}
