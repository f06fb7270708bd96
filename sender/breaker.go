package sender

import (
	"context"
	"crypto/rand"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
)

// The breaker of each destination is this instance's own gobreaker
// CircuitBreaker, and a board that the instances share through a Remote
// (Redis) when they share the work (breakerboard.go), so that a
// destination that is down opens its breaker on every instance, and one
// that is up for some instance does not open for the others.
//
// What gobreaker counts is this instance's own: its failure runs, and the
// state machine they drive (closed, open for the open time, half-open
// trials). An instance whose own failures open its breaker stops its own
// deliveries at once. What is shared is the destination's health, in
// hookgate's own types (Shared, Report) and text:
//
//   - each instance reports, at most once per merge interval while it
//     delivers, its latest success and when its current run of failures
//     began (none once a success ends it): its Report;
//   - the transitions of an instance's breaker to open and to closed are
//     proposed to the shared state (Shared), a new generation each, that
//     every instance follows within the refresh interval (breakerRefresh);
//   - an instance's opening is shared unless another instance vouches for
//     the destination: it has succeeded since the failures began, or its
//     latest outcome is a success within vouchWindow. A vouched-for
//     opening stays this instance's own: it waits out the open time
//     while the others deliver (its own network path is what fails);
//   - a shared opening is undone by a report of a success since its
//     failures began (an answer that was in flight when it opened);
//   - a trial that closes an instance's breaker closes the shared one.
//
// So one instance failing, however fast, opens nothing for the instances
// that deliver, and a destination down for everyone opens everywhere once
// each instance that delivers has met its own `failures` failures, or at
// once for the others when none vouches.
//
// Only outcomes and transitions write to the Remote: reading a breaker's
// state reads the board at most once per refresh interval, and an idle
// sender reports nothing.

// breaker is this instance's own breaker of a destination: a
// gobreaker.CircuitBreaker (circuit). Following a transition of the
// shared state replaces the circuit with a new one in that state:
// closed, its counts afresh, or open until the shared expiry.
type breaker struct {
	name string
	cfg  BreakerConfig
	// changed is told of each transition of the circuit, but those made
	// to follow the shared state.
	changed func(from, to gobreaker.State)
	cur     atomic.Pointer[circuit]
}

// circuit is one gobreaker.CircuitBreaker of a breaker, and how long it
// stays open when it opens: the open time, or what was left of the
// shared opening it followed.
type circuit struct {
	*gobreaker.CircuitBreaker[struct{}]
	open time.Duration
	// tripping is set while the circuit is tripped to follow a shared
	// opening, before it is in use: its first failure opens it then, and
	// the transition is not told.
	tripping bool
}

// newBreaker returns a closed breaker of the destination called name;
// changed is told of its transitions.
func newBreaker(name string, cfg BreakerConfig, changed func(from, to gobreaker.State)) *breaker {
	b := &breaker{name: name, cfg: cfg, changed: changed}
	b.cur.Store(b.newCircuit(cfg.Open))
	return b
}

func (b *breaker) newCircuit(open time.Duration) *circuit {
	c := &circuit{open: open}
	c.CircuitBreaker = gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        b.name,
		MaxRequests: uint32(b.cfg.HalfOpen),
		Timeout:     open,
		// ConsecutiveFailures alone, and no Interval.
		ReadyToTrip: func(n gobreaker.Counts) bool {
			return c.tripping || n.ConsecutiveFailures >= uint32(b.cfg.Failures)
		},
		// Only what Classify counts as a failure counts against a
		// destination (deliver leaves out what it does not count): a
		// permanent 4xx is the receiver answering.
		IsSuccessful: func(err error) bool { return !errors.Is(err, errTransient) },
		OnStateChange: func(_ string, from, to gobreaker.State) {
			if c.tripping {
				return
			}
			if to == gobreaker.StateOpen && c.open != b.cfg.Open {
				// It followed a shared opening, for what was left of it:
				// its own opening (a trial failed) is for the open time.
				b.trip(b.cfg.Open)
			}
			b.changed(from, to)
		},
	})
	return c
}

// trip replaces the circuit with one open for open (at least a
// nanosecond: half-open at once), its transition not told.
func (b *breaker) trip(open time.Duration) {
	c := b.newCircuit(max(open, time.Nanosecond))
	c.tripping = true
	_, _ = c.Execute(func() (struct{}, error) { return struct{}{}, errTransient })
	c.tripping = false
	b.cur.Store(c)
}

// follow puts the breaker in sh's state: closed, its counts afresh, or
// open until sh's expiry (by this instance's clock, as gobreaker's).
func (b *breaker) follow(sh Shared) {
	if !sh.Open {
		b.cur.Store(b.newCircuit(b.cfg.Open))
		return
	}
	b.trip(time.Until(sh.Expiry))
}

// count counts the outcome of an attempt, after it is made, so that no
// lock is held across a request. Execute's error is only the outcome
// handed to it, or its refusal to count one while open.
func (b *breaker) count(failed bool) {
	_, _ = b.cur.Load().Execute(func() (struct{}, error) {
		if failed {
			return struct{}{}, errTransient
		}
		return struct{}{}, nil
	})
}

// state is the circuit's state: an open one whose time is up is
// half-open.
func (b *breaker) state() gobreaker.State { return b.cur.Load().State() }

// sharedStore keeps each breaker's board as this instance knows it, and
// its outcomes and transitions, and merges them into an optional Remote.
type sharedStore struct {
	remote  Remote // nil: this instance alone
	self    string // this instance's name among the reports
	keep    time.Duration
	refresh time.Duration
	now     func() time.Time

	mu      sync.Mutex
	entries map[string]*sharedEntry
	flush   chan struct{}
}

// sharedEntry is one breaker as this instance knows it.
type sharedEntry struct {
	own     *breaker
	fetched time.Time
	board   Board  // as last read from the remote
	gen     uint64 // the shared generation own follows
	report  Report // this instance's outcomes
	// transition is a change of this instance's breaker, to open or to
	// closed, not yet proposed to the shared state; its Since is when it
	// changed.
	transition *Shared
	dirty      bool // report or transition not yet put
}

// newSharedStore returns a store over remote (nil for in-memory), which
// refreshes from it every refresh at most; open is how long a breaker
// stays open.
func newSharedStore(remote Remote, open, refresh time.Duration, now func() time.Time) *sharedStore {
	return &sharedStore{remote: remote, self: rand.Text()[:16], keep: max(forgetAfter, 2*open), refresh: refresh, now: now,
		entries: map[string]*sharedEntry{}, flush: make(chan struct{}, 1)}
}

// add keeps the breaker of the destination called name.
func (s *sharedStore) add(name string, b *breaker) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entries[name] = &sharedEntry{own: b}
}

// remove forgets the breaker of a destination removed (Sender.Apply). An
// outcome or a transition of it that lands later is dropped, and its
// state reads closed.
func (s *sharedStore) remove(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.entries, name)
}

// state is the state of the breaker called name, after a refresh from
// the remote when one is due.
func (s *sharedStore) state(name string) gobreaker.State {
	s.mu.Lock()
	e := s.entries[name]
	if e == nil {
		s.mu.Unlock()
		return s.idleState(name)
	}
	stale := s.remote != nil && s.now().Sub(e.fetched) >= s.refresh
	s.mu.Unlock()
	if stale {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		b, err := s.remote.Load(ctx, name)
		cancel()
		s.mu.Lock()
		e.fetched = s.now()
		if err == nil {
			s.followLocked(e, b)
		}
		s.mu.Unlock()
	}
	return e.own.state()
}

// idleState is the state of a breaker this instance has not made (its
// destination idle here, or removed): the shared state as the remote
// holds it, open until its expiry (half-open after), else closed.
func (s *sharedStore) idleState(name string) gobreaker.State {
	if s.remote == nil {
		return gobreaker.StateClosed
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	b, err := s.remote.Load(ctx, name)
	cancel()
	switch {
	case err != nil || !b.Shared.Open:
		return gobreaker.StateClosed
	case s.now().Before(b.Shared.Expiry):
		return gobreaker.StateOpen
	}
	return gobreaker.StateHalfOpen
}

// followLocked takes b as the board last read, and makes this instance's
// breaker follow its shared state when that is of a later generation:
// open until its expiry, or closed, its counts started afresh (the
// outcomes of attempts made before are dropped). A transition of this
// instance not yet shared is overtaken. Call with s.mu held.
func (s *sharedStore) followLocked(e *sharedEntry, b Board) {
	e.board = b
	if b.Shared.Gen <= e.gen {
		return
	}
	e.gen, e.transition = b.Shared.Gen, nil
	e.own.follow(b.Shared)
}

// transition notes a transition of this instance's breaker of name, to
// open until expiry or to closed, to be proposed to the shared state at
// the next merge. (Half-open is the expiry's, which every instance
// reaches alone.)
func (s *sharedStore) transition(name string, open bool, expiry time.Time) {
	if s.remote == nil {
		return
	}
	s.mu.Lock()
	e := s.entries[name]
	if e == nil {
		s.mu.Unlock()
		return
	}
	e.transition = &Shared{Open: open, Expiry: expiry, Since: s.now()}
	poke := s.markLocked(e)
	s.mu.Unlock()
	if poke {
		s.poke()
	}
}

// markLocked marks e to be put at the next merge, and reports whether it
// was not yet (then call poke). Call with s.mu held.
func (s *sharedStore) markLocked(e *sharedEntry) bool {
	was := e.dirty
	e.dirty = true
	return !was
}

// poke asks run for a merge round.
func (s *sharedStore) poke() {
	select {
	case s.flush <- struct{}{}:
	default:
	}
}

// outcome notes a counted outcome of an attempt to the breaker of name,
// at now, for this instance's report, whatever the breaker's state: a
// success is evidence of the destination's health even when it lands
// after the breaker opened.
func (s *sharedStore) outcome(name string, success bool, now time.Time) {
	s.mu.Lock()
	e := s.entries[name]
	if e == nil {
		s.mu.Unlock()
		return
	}
	if success {
		e.report.OK, e.report.Failing = now, time.Time{}
	} else if e.report.Failing.IsZero() {
		e.report.Failing = now
	}
	poke := s.remote != nil && s.markLocked(e)
	s.mu.Unlock()
	if poke {
		s.poke()
	}
}

// failingSince is when the destination called name began to fail, as
// this instance knows it, this instance's latest counted attempt having
// failed: at the latest success any instance reported (this one, and the
// others on the board as last read, but those forgotten), or at the
// earliest failure reported since, whichever is later. ok is false when
// this instance's latest attempt did not fail.
func (s *sharedStore) failingSince(name string) (since time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[name]
	if e == nil || e.report.Failing.IsZero() {
		return time.Time{}, false
	}
	lastOK, first := e.report.OK, e.report.Failing
	for inst, r := range e.board.Reports {
		if inst == s.self || s.now().Sub(r.At) >= forgetAfter {
			continue
		}
		if r.OK.After(lastOK) {
			lastOK = r.OK
		}
		if !r.Failing.IsZero() && r.Failing.Before(first) {
			first = r.Failing
		}
	}
	if lastOK.After(first) {
		first = lastOK
	}
	return first, true
}
