package sender

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
)

// Delivery is one destination's envelope of a published event.
type Delivery struct {
	Destination string `json:"destination"`
	State       State  `json:"state"`
	// Duplicate is set when the destination held the event already.
	Duplicate bool `json:"duplicate"`
}

// PublishResult is Publish's answer.
type PublishResult struct {
	// Deliveries are the event's envelopes, in the destinations' config
	// order; empty when no destination subscribes to its type.
	Deliveries []Delivery
	// Mismatch is set when a destination holds the event's ID with
	// another payload: nothing was written.
	Mismatch bool
}

// fanoutParallel bounds the store calls one Publish makes at once.
const fanoutParallel = 32

// parallel runs fn(0..n-1), fanoutParallel at a time, and returns the
// first error once all have returned.
func parallel(n int, fn func(i int) error) error {
	if n == 1 {
		return fn(0)
	}
	var g errgroup.Group
	g.SetLimit(fanoutParallel)
	for i := range n {
		g.Go(func() error { return fn(i) })
	}
	return g.Wait()
}

// ErrBadTenant means an event's tenant is no tenant ID (CheckTenant).
var ErrBadTenant = errors.New("bad tenant")

// ErrMissingEventType means an event to publish has no type to route by.
var ErrMissingEventType = errors.New("an event to fan out needs an event type")

// Subscribers lists tenant's destinations subscribed to eventType, in
// config order; with no tenant, those of no tenant.
func (s *Sender) Subscribers(eventType, tenant string) []string {
	var out []string
	set := s.set.Load()
	for _, name := range set.order {
		if TenantOf(name) != tenant {
			continue
		}
		for _, g := range set.byName[name].Events {
			if ok, _ := path.Match(g, eventType); ok {
				out = append(out, name)
				break
			}
		}
	}
	return out
}

// Publish fans ev out: one envelope per destination subscribed to its
// type, each delivered, retried, dead-lettered and redriven on its own.
//
// It is idempotent by ev.ID, and it completes what a crash cut short:
// the same event published again enqueues what is missing, and duplicates
// nothing. A destination holding the ID with another payload makes it a
// Mismatch, and nothing is written. A destination first seen after the
// event was created (Queue.FirstSeen) does not receive it, however long
// the others took to deliver it: the event's creation is its first
// publish, the CreatedAt that every one of its envelopes carries.
//
// Once it starts, a fan-out runs to its end whatever becomes of ctx (a
// client that hangs up), keeping only its values: a fan-out cut short
// waits for a publish again to complete it. Each store call is bounded by
// the store's own timeouts.
//
// An ID that is not 1 to 1024 bytes of visible ASCII is refused with an
// error that wraps ErrBadID, an entity over MaxEntityLen with
// ErrEntityTooLong, an empty type with ErrMissingEventType, and a tenant
// that is no tenant ID with ErrBadTenant; another
// error leaves the outcome unknown: publish again.
func (s *Sender) Publish(ctx context.Context, ev *Event) (PublishResult, error) {
	if err := CheckID(ev.ID); err != nil {
		return PublishResult{}, err
	}
	if err := CheckEntity(ev.Entity); err != nil {
		return PublishResult{}, err
	}
	if ev.EventType == "" {
		return PublishResult{}, ErrMissingEventType
	}
	if ev.Tenant != "" {
		if err := CheckTenant(ev.Tenant); err != nil {
			return PublishResult{}, fmt.Errorf("%w: %v", ErrBadTenant, err)
		}
	}
	ctx = context.WithoutCancel(ctx)
	subs := s.Subscribers(ev.EventType, ev.Tenant)
	if len(subs) == 0 {
		s.obs.Enqueued("", "unrouted")
		return PublishResult{Deliveries: []Delivery{}}, nil
	}
	// The destinations must be seen before the event's first write, or a
	// publish that completes this one would take them for later
	// subscribers; Run records them, unless the store failed at start.
	if !s.seen.Load() {
		if _, err := s.queue.FirstSeen(ctx, s.Destinations(), s.now()); err != nil {
			return PublishResult{}, err
		}
		s.seen.Store(true)
	}
	// What each destination holds already: the first write of an earlier
	// publish of this event, or all of them. Their CreatedAt is the
	// event's creation, whatever their state. Read at once, then written
	// fanoutParallel destinations at a time: a store round trip each.
	held, err := s.queue.MetasAcross(ctx, subs, ev.ID)
	if err != nil {
		return PublishResult{}, fmt.Errorf("reading the subscribers' %s: %w", ev.ID, err)
	}
	fp := PayloadFingerprint(ev.Payload)
	var created time.Time
	nheld := 0
	for _, m := range held {
		if m == nil {
			continue
		}
		if m.Broken || m.Fingerprint != fp {
			return PublishResult{Mismatch: true}, nil
		}
		nheld++
		if created.IsZero() || m.CreatedAt.Before(created) {
			created = m.CreatedAt
		}
	}
	if created.IsZero() { // its first publish creates it
		created = s.now()
	}
	var since map[string]time.Time
	if nheld > 0 && nheld < len(subs) {
		var err error
		if since, err = s.queue.FirstSeen(ctx, subs, s.now()); err != nil {
			return PublishResult{}, err
		}
	}
	deliveries := make([]*Delivery, len(subs))
	var mismatch atomic.Bool
	err = parallel(len(subs), func(i int) error {
		d := subs[i]
		if m := held[i]; m != nil {
			s.obs.Enqueued(d, "duplicate")
			deliveries[i] = &Delivery{Destination: d, State: m.State, Duplicate: true}
			return nil
		}
		if since[d].After(created) {
			return nil // subscribed after the event was created
		}
		e := ev.Envelope(d)
		e.CreatedAt = created
		r, err := s.Enqueue(ctx, e)
		if err != nil {
			return err
		}
		if r.Mismatch { // another publish of this ID, with another payload, got here first
			mismatch.Store(true)
		}
		deliveries[i] = &Delivery{Destination: d, State: r.State, Duplicate: r.Duplicate}
		return nil
	})
	if err != nil {
		return PublishResult{}, err
	}
	if mismatch.Load() {
		return PublishResult{Mismatch: true}, nil
	}
	res := PublishResult{Deliveries: make([]Delivery, 0, len(subs))}
	for _, d := range deliveries {
		if d != nil {
			res.Deliveries = append(res.Deliveries, *d)
		}
	}
	return res, nil
}
