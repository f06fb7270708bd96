package sender

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// Operational events are what hookgate tells about a destination itself,
// delivered to the destination that Options.Operational names, signed
// and retried as any other envelope:
//
//   - destination.failing: its attempts have all failed (as the breaker
//     counts failures) for Config.FailingAfter;
//   - destination.disabled: they have all failed for Config.DisableAfter,
//     or it answered 410 Gone: it is paused, its envelopes kept, until an
//     operator enables it (Ops.Enable, or a resume);
//   - destination.enabled: a disabled destination resumed;
//   - dead_letter.created: envelopes of it died, at most one event per
//     destination per minute, with their count.
//
// Each names the destination and its tenant, so that a platform can route
// it to the destination's owner. Its delivery ID names what it tells (the
// failing run, the minute), and its payload is read from what every
// instance shares (the breaker's board, the store's dead letters), so
// that instances telling the same thing enqueue one envelope. None is told
// about the operational destination itself.

// The operational events' types.
const (
	EventDestinationFailing  = "destination.failing"
	EventDestinationDisabled = "destination.disabled"
	EventDestinationEnabled  = "destination.enabled"
	EventDeadLetterCreated   = "dead_letter.created"
)

// Defaults of Config's DisableAfter and FailingAfter.
const (
	DefaultDisableAfter = 120 * time.Hour
	DefaultFailingAfter = time.Hour
)

// PausedByDisabled is the pause DisableAfter makes.
const PausedByDisabled = "disabled"

// IsDisabled reports whether a pause made by by disables the destination:
// DisableAfter's, or a 410's.
func IsDisabled(by string) bool { return by == PausedByDisabled || by == PausedByGone }

// OperationalEvent is an operational event's payload.
type OperationalEvent struct {
	Type string          `json:"type"`
	Data OperationalData `json:"data"`
}

// OperationalData is what an operational event tells.
type OperationalData struct {
	Destination string `json:"destination"`
	Tenant      string `json:"tenant,omitempty"`
	// Reason is a destination.disabled's: failing (DisableAfter) or gone
	// (a 410).
	Reason string `json:"reason,omitempty"`
	// FailingSince is when its attempts began to fail, to the minute
	// (destination.failing, destination.disabled for failing).
	FailingSince *time.Time `json:"failing_since,omitempty"`
	// By is who enabled it (destination.enabled).
	By string `json:"by,omitempty"`
	// Count is how many of its envelopes died in [Since, Until)
	// (dead_letter.created).
	Count int        `json:"count,omitempty"`
	Since *time.Time `json:"since,omitempty"`
	Until *time.Time `json:"until,omitempty"`
}

// told is what was told of one destination by this instance.
type told struct {
	mu      sync.Mutex
	failing time.Time     // the failing run destination.failing was told of
	deaths  map[int64]int // unix minute: envelopes seen dying in it here
}

// tell enqueues an operational event about dest to the operational
// destination, under id. A failure is logged: the event is lost, what it
// tells is not (the destination's state and dead letters stay).
func (s *Sender) tell(ctx context.Context, typ, dest, id string, data OperationalData) {
	if s.operational == "" || dest == s.operational {
		return
	}
	data.Destination, data.Tenant = dest, TenantOf(dest)
	payload, _ := json.Marshal(OperationalEvent{Type: typ, Data: data})
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, err := s.Enqueue(ctx, &Envelope{ID: id, Destination: s.operational, EventType: typ, Entity: dest,
		Payload: payload, ContentType: "application/json"})
	if err != nil {
		s.logger.Error("telling an operational event failed", "type", typ, "destination", dest, "error", err)
	}
}

// failed judges d after a counted failure at now: failing for
// FailingAfter tells destination.failing, once per failing run; for
// DisableAfter disables it. The run starts again when d is enabled
// (restartRun).
func (s *Sender) failed(ctx context.Context, d *destination, now time.Time) {
	since, ok := d.shared.failingSince(d.Name)
	if !ok {
		return
	}
	// To the minute: what instances that read the same board tell alike.
	run := since.UTC().Truncate(time.Minute)
	if s.cfg.FailingAfter > 0 && now.Sub(since) >= s.cfg.FailingAfter {
		d.told.mu.Lock()
		first := !d.told.failing.Equal(run)
		d.told.failing = run
		d.told.mu.Unlock()
		if first {
			s.logger.Warn("destination failing", "destination", d.Name, "since", run)
			s.tell(ctx, EventDestinationFailing, d.Name, opID("failing", d.Name, run), OperationalData{FailingSince: &run})
		}
	}
	if s.cfg.DisableAfter > 0 && now.Sub(since) >= s.cfg.DisableAfter {
		s.disable(ctx, d, PausedByDisabled, run)
	}
}

// disable pauses d, by PausedByDisabled (its attempts failing since run)
// or PausedByGone (a 410): here at once, so that no other attempt starts,
// then in the store, and tells destination.disabled. The attempts already
// in flight leave it to the first. If the store cannot be written, d
// stays paused here until the store is read again.
func (s *Sender) disable(ctx context.Context, d *destination, by string, run time.Time) {
	was := d.pause.hold(true)
	defer d.pause.written(false, was)
	if was {
		return
	}
	if err := s.queue.SetPaused(context.WithoutCancel(ctx), d.Name, true, by); err != nil {
		s.logger.Error("disabling a destination", "destination", d.Name, "error", err)
		s.obs.StoreError(d.Name, "pause")
		return
	}
	data := OperationalData{Reason: "failing", FailingSince: &run}
	defer func() { s.obs.Disabled(d.Name, data.Reason) }()
	if by == PausedByGone {
		s.logger.Warn("destination answered 410 Gone: disabled until an operator enables it", "destination", d.Name)
		data = OperationalData{Reason: "gone"}
	} else {
		s.logger.Warn("destination disabled: its attempts have all failed since "+run.Format(time.RFC3339)+
			": paused, its envelopes kept, until an operator enables it", "destination", d.Name, "disable_after", s.cfg.DisableAfter)
	}
	s.tell(ctx, EventDestinationDisabled, d.Name, opID("disabled", d.Name, run), data)
}

// restartRun starts d's failing run afresh, at now: an enable counts as
// a success on the breaker's board (shared through Redis), so that every
// instance's run starts after it, whatever it saw of the disablement;
// like a success, it closes a shared breaker the failures opened.
func (s *Sender) restartRun(name string, now time.Time) {
	d, ok := s.dest(name)
	if !ok {
		return
	}
	s.breaker(d) // its entry on the board, made here if it is idle here
	d.shared.outcome(d.Name, true, now)
}

// opID is the delivery ID of an operational event about dest, at t.
func opID(what, dest string, t time.Time) string {
	return "hookgate." + what + "." + dest + "." + strconv.FormatInt(t.Unix(), 10)
}

// noteDeath notes an envelope of d dead at t, for dead_letter.created.
func (s *Sender) noteDeath(d *destination, t time.Time) {
	if s.operational == "" || d.Name == s.operational {
		return
	}
	minute := t.UTC().Truncate(time.Minute).Unix()
	d.told.mu.Lock()
	if d.told.deaths == nil {
		d.told.deaths = map[int64]int{}
	}
	d.told.deaths[minute]++
	d.told.mu.Unlock()
}

// deathsSettle is how long after a minute ends its dead_letter.created is
// told: the deaths settled late (a lease's settle margin) are counted.
const deathsSettle = 10 * time.Second

// tellDeaths tells, every few seconds until ctx ends, dead_letter.created
// for each destination and minute in which this instance saw an envelope
// die, once the minute is over: counted from the delivery history's dead
// entries of that minute, which every instance reads alike (or, when the
// history keeps fewer, what this instance saw).
func (s *Sender) tellDeaths(ctx context.Context) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := s.now()
		set := s.set.Load()
		for _, name := range set.order {
			d := set.byName[name]
			d.told.mu.Lock()
			due := map[int64]int{}
			for m, n := range d.told.deaths {
				if now.Sub(time.Unix(m, 0).Add(time.Minute)) >= deathsSettle {
					due[m] = n
					delete(d.told.deaths, m)
				}
			}
			d.told.mu.Unlock()
			for m, seen := range due {
				since := time.Unix(m, 0).UTC()
				until := since.Add(time.Minute)
				n, err := s.countDead(ctx, name, since, until)
				if err != nil {
					s.logger.Error("counting a minute's dead letters", "destination", name, "error", err)
				}
				s.tell(ctx, EventDeadLetterCreated, name, opID("dead_letter", name, since),
					OperationalData{Count: max(n, seen), Since: &since, Until: &until})
			}
		}
	}
}

// countDead counts the history's entries of dest that died in [since,
// until).
func (s *Sender) countDead(ctx context.Context, dest string, since, until time.Time) (int, error) {
	n, cursor := 0, ""
	for range 100 { // a bound: 100 calls, each of a bounded look
		page, next, err := s.queue.History(ctx, dest, HistoryFilter{State: StateDead, Since: since, Until: until}, cursor, 1000)
		if err != nil {
			return n, err
		}
		n += len(page)
		if next == "" {
			break
		}
		cursor = next
	}
	return n, nil
}

// CheckOperational refuses an operational destination that is not one
// of dests, or is a tenant's.
func CheckOperational(name string, dests []Destination) error {
	if name == "" {
		return nil
	}
	if TenantOf(name) != "" {
		return fmt.Errorf("operational %q: a tenant's destination would receive every tenant's events: name one of no tenant", name)
	}
	for _, d := range dests {
		if d.Name == name {
			return nil
		}
	}
	return fmt.Errorf("operational %q: no such destination: name one of the hookgate block's", name)
}
