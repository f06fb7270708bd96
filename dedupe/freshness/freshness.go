// Package freshness holds the stale-event rule, which keeps a receiver
// from applying an event older than one it already applied to the same
// entity: per entity, a watermark of the newest applied event (by the
// event's own time or by a sequence number, never by arrival: a [Mark])
// and a lease, so that one entity's events are checked and applied one at
// a time. An event older than the watermark is superseded (an equal one
// is applied); one whose own time is older than the allowed age
// ([Config].MaxAge) is too old, whatever its arrival time; and the
// watermark moves up only when the upstream applied the event (answered
// 2xx). Its backend is an [EntityStore], which dedupe's redisstore and
// boltstore implement and dedupe/storetest holds to one suite. It
// imports no Caddy.
package freshness

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/hookgate/hookgate/dedupe/internal/lease"
	"github.com/hookgate/hookgate/internal/problem"
)

// EntityStore keeps the watermarks and entity leases. Each method is atomic.
type EntityStore interface {
	// AcquireEntity checks mark against entity's watermark and, unless the
	// event is superseded or another live lease holds the entity, takes
	// the entity's lease with token until now+lease.
	AcquireEntity(ctx context.Context, entity string, a Acquire) (AcquireResult, error)

	// FinishEntity ends an event's hold of entity. With advance, the
	// watermark moves up to mark (never down) and is kept until
	// now+retention, whether or not token still holds the lease: the
	// watermark is a max-register, and the upstream did apply the event.
	// Then the lease is released if token holds it (only the release is
	// fenced). A retry of the same call changes nothing more.
	FinishEntity(ctx context.Context, entity, token string, f Finish) error

	// GetEntity reads an entity's state without changing it: the
	// watermark (expired ones are absent) and the lease (free when its
	// LeaseUntil is past).
	GetEntity(ctx context.Context, entity string, now time.Time) (EntityState, error)
}

// EntityState is an entity's freshness state, as GetEntity reads it.
type EntityState struct {
	Watermark        int64
	HasWatermark     bool
	WatermarkExpires time.Time
	LeaseUntil       time.Time // zero when free
}

// Inspect reads the watermarks of an entity, by event time and by
// sequence: an operator's view.
func (f *Freshness) Inspect(ctx context.Context, entity string) (byTime, bySequence EntityState, err error) {
	now := f.now()
	if byTime, err = f.store.GetEntity(ctx, Mark{}.key(entity), now); err != nil {
		return
	}
	bySequence, err = f.store.GetEntity(ctx, Mark{bySequence: true}.key(entity), now)
	return
}

// Mark is where an event stands in its entity's order: its own time
// (TimeMark) or its sequence number (SequenceMark). An entity's marks of
// the two kinds are watermarks apart.
type Mark struct {
	bySequence bool
	value      int64     // the time in unix µs, or the sequence number
	time       time.Time // by time
}

// TimeMark is the mark of an event by its own time.
func TimeMark(t time.Time) Mark { return Mark{value: t.UnixMicro(), time: t} }

// SequenceMark is the mark of an event by its sequence number.
func SequenceMark(seq int64) Mark { return Mark{bySequence: true, value: seq} }

// key is the store's key of entity's watermark of m's kind.
func (m Mark) key(entity string) string {
	if m.bySequence {
		return "s:" + entity
	}
	return "t:" + entity
}

// Acquire is what EntityStore.AcquireEntity checks and writes.
type Acquire struct {
	Mark  int64 // the event's time (unix µs) or sequence number
	Token string
	Lease time.Duration
	Now   time.Time
}

// Finish is what EntityStore.FinishEntity writes.
type Finish struct {
	Advance   bool
	Mark      int64
	Retention time.Duration
	Now       time.Time
}

// AcquireStatus is AcquireEntity's answer.
type AcquireStatus int

// The acquire answers.
const (
	Acquired   AcquireStatus = iota + 1 // the caller holds the entity: forward
	Superseded                          // mark is older than the watermark
	Busy                                // another event of the entity holds the lease
)

// AcquireResult is AcquireEntity's answer.
type AcquireResult struct {
	Status AcquireStatus
	// Watermark is the entity's watermark, and HasWatermark whether it has one.
	Watermark    int64
	HasWatermark bool
	// LeaseUntil is when the lease in the way expires (Busy).
	LeaseUntil time.Time
}

// Defaults of Config.
const (
	DefaultLease     = 30 * time.Second
	DefaultRetention = 720 * time.Hour
)

// MaxEntityLen is the longest entity the stores accept, in bytes.
const MaxEntityLen = 1024

// Freshness outcomes, as metric results and problem reasons.
const (
	ResultApplied    = "applied"
	ResultSuperseded = "superseded"
	ResultTooOld     = "too_old"
	ResultBusy       = "entity_busy"
)

// Errors of Check for events that are not judged at all.
var (
	ErrEventInFuture = errors.New("event time is more than 5 minutes in the future")
)

// MaxFuture is how far ahead of now an event time may be: one bogus
// future-dated event must not freeze its entity for ever.
const MaxFuture = 5 * time.Minute

// Config tunes a Freshness.
type Config struct {
	// MaxAge makes an event stale when its own time is older (event times
	// only). Zero: no limit.
	MaxAge time.Duration
	// Wait is how long an event waits for its entity's lease. Zero
	// answers Busy at once.
	Wait time.Duration
	// Lease bounds the hold of an entity while its event is forwarded.
	// Default 30s.
	Lease time.Duration
	// Retention is how long a watermark is kept after it last moved.
	// Default 720h.
	Retention time.Duration
}

// Freshness runs the freshness rule over an EntityStore. It is safe for
// concurrent use.
type Freshness struct {
	store    EntityStore
	cfg      Config
	now      func() time.Time
	releases lease.Releases // the lost leases being released
}

// Option configures a Freshness.
type Option func(*Freshness)

// WithClock sets the clock; the default is time.Now.
func WithClock(now func() time.Time) Option { return func(f *Freshness) { f.now = now } }

// New returns a Freshness over store.
func New(store EntityStore, cfg Config, opts ...Option) (*Freshness, error) {
	if cfg.Lease == 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Retention == 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.Lease < time.Second || cfg.MaxAge < 0 || cfg.Wait < 0 || cfg.Retention < cfg.Lease {
		return nil, fmt.Errorf("freshness: lease must be at least 1s, retention at least the lease, max_age and wait not negative")
	}
	f := &Freshness{store: store, cfg: cfg, now: time.Now, releases: lease.NewReleases()}
	for _, o := range opts {
		o(f)
	}
	return f, nil
}

// Lease returns the configured lease.
func (f *Freshness) Lease() time.Duration { return f.cfg.Lease }

// Judgement is Check's answer.
type Judgement struct {
	// Result is applied (forward, then Done), superseded, too_old or
	// entity_busy.
	Result string
	// Token is the entity lease to pass to Done (applied).
	Token string
	// LeaseUntil is when the caller's lease ends (applied), or when the
	// lease in the way expires (entity_busy).
	LeaseUntil time.Time
}

// Check judges an event of entity at mark. An event time more than
// MaxFuture ahead fails with ErrEventInFuture; MaxAge judges event times
// only.
func (f *Freshness) Check(ctx context.Context, entity string, mark Mark) (Judgement, error) {
	if !mark.bySequence {
		now := f.now()
		if mark.time.Sub(now) > MaxFuture {
			return Judgement{}, ErrEventInFuture
		}
		if f.cfg.MaxAge > 0 && now.Sub(mark.time) > f.cfg.MaxAge {
			return Judgement{Result: ResultTooOld}, nil
		}
	}
	key := mark.key(entity)

	deadline := f.now().Add(f.cfg.Wait)
	poll := 5 * time.Millisecond
	for {
		token, now := rand.Text(), f.now()
		res, err := f.store.AcquireEntity(ctx, key, Acquire{Mark: mark.value, Token: token, Lease: f.cfg.Lease, Now: now})
		if err != nil {
			// The lease may have been taken although the reply was lost
			// (a timeout, the client leaving): it would hold back every
			// event of the entity until it ends. Let it go once the store
			// answers again.
			f.releaseLost(key, token, now.Add(f.cfg.Lease))
			return Judgement{}, err
		}
		switch res.Status {
		case Acquired:
			return Judgement{Result: ResultApplied, Token: token, LeaseUntil: now.Add(f.cfg.Lease)}, nil
		case Superseded:
			return Judgement{Result: ResultSuperseded}, nil
		case Busy:
			now := f.now()
			if !now.Before(deadline) {
				return Judgement{Result: ResultBusy, LeaseUntil: res.LeaseUntil}, nil
			}
			if err := lease.Sleep(ctx, min(poll, deadline.Sub(now))); err != nil {
				return Judgement{}, err
			}
			poll = min(poll*2, 50*time.Millisecond)
		default:
			return Judgement{}, fmt.Errorf("store answered acquire status %d", res.Status)
		}
	}
}

// releaseLost frees, in the background, an entity lease whose acquire
// failed, if it holds it; the watermark is left as it is.
func (f *Freshness) releaseLost(key, token string, leaseUntil time.Time) {
	f.releases.Release(lease.Sleep, leaseUntil, func(ctx context.Context) error {
		return f.store.FinishEntity(ctx, key, token, Finish{Retention: f.cfg.Retention, Now: f.now()})
	})
}

// Done ends an event of entity at mark that Check judged applied, under
// the lease token: the watermark moves to mark when the upstream applied
// it (applied), and the entity's lease is released either way. A store
// failure is retried until ctx ends: give ctx the entity lease's
// deadline, not the client's cancellation.
func (f *Freshness) Done(ctx context.Context, entity, token string, mark Mark, applied bool) error {
	key := mark.key(entity)
	finish := func() error {
		return f.store.FinishEntity(ctx, key, token, Finish{Advance: applied, Mark: mark.value, Retention: f.cfg.Retention, Now: f.now()})
	}
	err := finish()
	if err != nil {
		err = lease.Retry(ctx, lease.Sleep, finish)
	}
	return err
}

// MaxSequence keeps sequence numbers exact in the stores (Lua numbers are
// doubles): 2^53-1.
const MaxSequence = 1<<53 - 1

// ParseSequence parses an event's sequence number: an integer from 0 to
// MaxSequence. Its error quotes at most 40 bytes of s.
func ParseSequence(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > MaxSequence {
		return 0, fmt.Errorf("sequence %q is not an integer between 0 and 2^53-1", problem.Truncate(s, 40))
	}
	return n, nil
}

// maxUnixSeconds is 9999-12-31T23:59:59Z, the last time RFC 3339 can write.
const maxUnixSeconds = 253402300799

// ParseEventTime parses an event's time as producers write it: RFC 3339
// or unix seconds (an integer or a decimal), as webhook_freshness judges
// it and the sender's enqueue doors take it. Its
// error quotes at most 40 bytes of s.
func ParseEventTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f > maxUnixSeconds || math.IsNaN(f) || strings.ContainsAny(s, "eExXpP_") {
		return time.Time{}, fmt.Errorf("event time %q is neither RFC 3339 nor unix seconds", problem.Truncate(s, 40))
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), nil
}
