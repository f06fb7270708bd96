package sender

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"
	"github.com/tidwall/gjson"
)

// The breaker of each destination is gobreaker's DistributedCircuitBreaker
// over a SharedDataStore: in memory for one instance, and over a Remote
// (Redis) when instances share the work, so that a destination that is
// down opens its breaker on every instance, and one that is up for some
// instance does not open for the others.
//
// What gobreaker counts is this instance's own: its failure runs, and the
// state machine they drive (closed, open for the open time, half-open
// trials). An instance whose own failures open its breaker stops its own
// deliveries at once. What is shared is the destination's health:
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
// Only outcomes write: the sender reads a breaker's state with
// sharedStore.state, which writes nothing (gobreaker's own State() writes
// the state back on every call), and an idle sender reports nothing.

// Remote is where the breakers' shared state and the instances' reports
// live: Redis, for instances that share the work.
type Remote interface {
	// Load reads the shared state of the breaker called name and the
	// instances' reports on it: the zero Board when there are none.
	Load(ctx context.Context, name string) (Board, error)
	// Put stores u's report and forgets the reports u names, and, when u
	// has a Next, stores it as the shared state if the stored one is
	// still of generation u.Gen. It reports whether it stored u.Next.
	Put(ctx context.Context, name string, u Update) (bool, error)
}

// Board is a breaker's shared state and the instances' reports.
type Board struct {
	Shared  Shared
	Reports map[string]Report // by instance
}

// Shared is the state a breaker's instances share: each transition
// shared is a new generation.
type Shared struct {
	Gen   uint64
	State gobreaker.State // closed or open
	// Expiry is when an open breaker turns half-open; Since is when the
	// failures that opened it began.
	Expiry, Since time.Time
}

// Report is what an instance saw of a destination.
type Report struct {
	// OK is its latest success (zero: none); Failing is when its current
	// run of failures began (zero when its latest outcome succeeded).
	OK, Failing time.Time
	// At is when it reported: a report not renewed for forgetAfter is
	// forgotten.
	At time.Time
}

// Update is one instance's write to a breaker's Remote.
type Update struct {
	Instance string
	Report   Report
	// Forget names the instances whose reports are gone stale.
	Forget []string
	// Next, when set, replaces the shared state of generation Gen.
	Gen  uint64
	Next *Shared
	// Keep is how long the whole is kept after its last update.
	Keep time.Duration
}

// vouchWindow is how recent an instance's latest success, with no failure
// after it, must be to vouch for its destination against another's
// failures: longer than an instance that delivers takes to report
// (the merge interval and a round trip).
const vouchWindow = time.Second

// forgetAfter is how long an instance's report is kept when it stops
// reporting (it stopped, or delivers nothing): long after it could
// vouch for anything.
const forgetAfter = 24 * time.Hour

// sharedStore is a gobreaker.SharedDataStore over an optional Remote.
type sharedStore struct {
	remote  Remote // nil: this instance alone
	self    string // this instance's name among the reports
	keep    time.Duration
	refresh time.Duration
	now     func() time.Time

	mu      sync.Mutex
	locks   map[string]*sync.Mutex
	entries map[string]*sharedEntry
	flush   chan struct{}
}

// sharedEntry is one breaker as this instance knows it.
type sharedEntry struct {
	data    []byte  // this instance's gobreaker state
	decoded decoded // data decoded once: every delivery reads it
	fetched time.Time
	board   Board  // as last read from the remote
	gen     uint64 // the shared generation data follows
	report  Report // this instance's outcomes
	// transition is a change of this instance's breaker, to open or to
	// closed, not yet proposed to the shared state; its Since is when it
	// changed.
	transition *Shared
	dirty      bool // report or transition not yet put
}

// decoded is a stored state decoded; ok is false when it does not
// decode.
type decoded struct {
	st gobreaker.SharedState
	ok bool
}

// decode reads the fields of a state that the store compares and reads
// (state, generation, counts, expiry) with gjson, which allocates next to
// nothing: every counted attempt writes a state, and encoding/json's
// decoder cost as much as the rest of an attempt. Where encoding/json
// decodes a state, decode reads the same; anything but those fields once
// each, in the form gobreaker writes them (digits, keys as spelled), is
// left to encoding/json, as before.
func decode(data []byte) decoded {
	d := decoded{ok: gjson.ValidBytes(data)}
	seen := 0
	if d.ok {
		gjson.ParseBytes(data).ForEach(func(k, v gjson.Result) bool {
			switch k.Str {
			case "state":
				n, err := strconv.ParseInt(digits(v), 10, 0)
				d.st.State, d.ok = gobreaker.State(n), err == nil
			case "generation":
				n, err := strconv.ParseUint(digits(v), 10, 64)
				d.st.Generation, d.ok = n, err == nil
			case "counts":
				d.ok = v.IsObject() && decodeCounts(v, &d.st.Counts)
			case "expiry":
				d.ok = v.Type == gjson.String && d.st.Expiry.UnmarshalJSON([]byte(v.Raw)) == nil
			default: // age, buckets and start are not read
				d.ok = !foldsTo(k.Str, "state", "generation", "counts", "expiry")
				return d.ok
			}
			seen++
			return d.ok
		})
	}
	if !d.ok || seen != 4 {
		var st gobreaker.SharedState
		d.ok = json.Unmarshal(data, &st) == nil
		d.st = st
	}
	return d
}

// digits is v's text if v is a number written in digits alone (as
// encoding/json writes an unsigned integer), else "" (which no parse
// takes).
func digits(v gjson.Result) string {
	if v.Type != gjson.Number || strings.Trim(v.Raw, "0123456789") != "" {
		return ""
	}
	return v.Raw
}

// foldsTo reports whether k is one of names spelled otherwise: encoding/json
// matches a key to a field whatever its case.
func foldsTo(k string, names ...string) bool {
	for _, n := range names {
		if strings.EqualFold(k, n) {
			return true
		}
	}
	return false
}

// decodeCounts reads gobreaker's Counts, as encoding/json writes them.
func decodeCounts(v gjson.Result, c *gobreaker.Counts) bool {
	ok, seen := true, 0
	v.ForEach(func(k, n gjson.Result) bool {
		var f *uint32
		switch k.Str {
		case "Requests":
			f = &c.Requests
		case "TotalSuccesses":
			f = &c.TotalSuccesses
		case "TotalFailures":
			f = &c.TotalFailures
		case "TotalExclusions":
			f = &c.TotalExclusions
		case "ConsecutiveSuccesses":
			f = &c.ConsecutiveSuccesses
		case "ConsecutiveFailures":
			f = &c.ConsecutiveFailures
		default:
			ok = !foldsTo(k.Str, "Requests", "TotalSuccesses", "TotalFailures", "TotalExclusions", "ConsecutiveSuccesses", "ConsecutiveFailures")
			return ok
		}
		u, err := strconv.ParseUint(digits(n), 10, 32)
		*f, ok = uint32(u), err == nil
		seen++
		return ok
	})
	return ok && seen == 6
}

// newSharedStore returns a store over remote (nil for in-memory), which
// refreshes from it every refresh at most; open is how long a breaker
// stays open.
func newSharedStore(remote Remote, open, refresh time.Duration, now func() time.Time) *sharedStore {
	return &sharedStore{remote: remote, self: rand.Text()[:16], keep: max(forgetAfter, 2*open), refresh: refresh, now: now,
		locks: map[string]*sync.Mutex{}, entries: map[string]*sharedEntry{}, flush: make(chan struct{}, 1)}
}

func (s *sharedStore) lockOf(name string) *sync.Mutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.locks[name]
	if !ok {
		l = new(sync.Mutex)
		s.locks[name] = l
	}
	return l
}

// Lock implements gobreaker.SharedDataStore, in-process: what gobreaker
// counts is this instance's own.
func (s *sharedStore) Lock(name string) error {
	s.lockOf(name).Lock()
	return nil
}

// Unlock implements gobreaker.SharedDataStore.
func (s *sharedStore) Unlock(name string) error {
	s.lockOf(name).Unlock()
	return nil
}

// entryLocked is name's entry, made when there is none. Call with s.mu
// held.
func (s *sharedStore) entryLocked(name string) *sharedEntry {
	e := s.entries[name]
	if e == nil {
		e = new(sharedEntry)
		s.entries[name] = e
	}
	return e
}

// GetData implements gobreaker.SharedDataStore: this instance's state,
// which follows each transition of the shared state, read from the
// remote when what was read is older than the refresh interval.
func (s *sharedStore) GetData(name string) ([]byte, error) {
	return s.current(name), nil
}

// current is name's state (nil when gobreaker has not written one yet),
// after a refresh from the remote when one is due.
func (s *sharedStore) current(name string) []byte {
	s.mu.Lock()
	e := s.entries[name]
	stale := s.remote != nil && (e == nil || s.now().Sub(e.fetched) >= s.refresh)
	s.mu.Unlock()
	if stale {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		b, err := s.remote.Load(ctx, name)
		cancel()
		s.mu.Lock()
		e = s.entryLocked(name)
		if err != nil || e.data != nil { // else read again once gobreaker has written its first state
			e.fetched = s.now()
		}
		if err == nil {
			s.followLocked(e, b)
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e = s.entries[name]; e == nil {
		return nil
	}
	return e.data
}

// followLocked takes b as the board last read, and makes this instance's
// state follow its shared state when that is of a later generation: open
// until its expiry, or closed, its counts started afresh (a new
// generation, so gobreaker drops the outcomes of attempts made before).
// A transition of this instance not yet shared is overtaken. Before
// gobreaker has written its first state, there is nothing to follow:
// current reads the board again at its next call. Call with s.mu held.
func (s *sharedStore) followLocked(e *sharedEntry, b Board) {
	e.board = b
	sh := b.Shared
	var st gobreaker.SharedState
	if sh.Gen <= e.gen || e.data == nil || json.Unmarshal(e.data, &st) != nil {
		return
	}
	e.gen, e.transition = sh.Gen, nil
	st.State, st.Generation, st.Age, st.Counts, st.Expiry = sh.State, st.Generation+1, 0, gobreaker.Counts{}, time.Time{}
	st.Buckets = make([]gobreaker.Counts, len(st.Buckets)) // as many as gobreaker's settings make
	if sh.State == gobreaker.StateOpen {
		st.Expiry = sh.Expiry
	}
	data, err := json.Marshal(st)
	if err != nil {
		return
	}
	e.data, e.decoded = data, decode(data)
}

// newerDecoded reports whether state a is newer than b: of a later
// generation, or of the same with more requests counted (or as many,
// when orEqual). gobreaker reads the state before it takes the lock, so
// a late write of what it read must not undo a transition, nor lose
// counts, that landed meanwhile. A state that does not decode is taken
// as newer, as what replaces it.
func newerDecoded(a, b decoded, orEqual bool) bool {
	if !a.ok || !b.ok {
		return true
	}
	x, y := &a.st, &b.st
	if x.Generation != y.Generation {
		return x.Generation > y.Generation
	}
	return x.Counts.Requests > y.Counts.Requests || (orEqual && x.Counts.Requests == y.Counts.Requests)
}

// SetData implements gobreaker.SharedDataStore: the state is kept, unless
// it is older than what is kept. A transition to open or to closed is
// proposed to the shared state at the next merge.
func (s *sharedStore) SetData(name string, data []byte) error {
	d := decode(data)
	s.mu.Lock()
	e := s.entryLocked(name)
	if e.data != nil && (bytes.Equal(data, e.data) || !newerDecoded(d, e.decoded, true)) {
		s.mu.Unlock()
		return nil
	}
	changed := e.data != nil && d.ok && e.decoded.ok && d.st.State != e.decoded.st.State
	e.data, e.decoded = data, d
	poke := false
	if changed && d.st.State != gobreaker.StateHalfOpen && s.remote != nil {
		// Half-open is the expiry's, which every instance reaches alone.
		e.transition = &Shared{State: d.st.State, Expiry: d.st.Expiry, Since: s.now()}
		poke = s.markLocked(e)
	}
	s.mu.Unlock()
	if poke {
		s.poke()
	}
	return nil
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

// stateKey is the name gobreaker's DistributedCircuitBreaker keeps the
// state of the breaker called name under in its SharedDataStore.
func stateKey(name string) string { return "gobreaker:state:" + name }

// state reads this instance's state of the breaker kept under key
// (stateKey of its name) at now (gobreaker's clock, time.Now), decoded
// when it was stored, and writes nothing: an open breaker whose time is
// up reads half-open, as gobreaker would make it, and becomes so when its
// first trial is counted. Closed when there is no state, or it cannot be
// read.
func (s *sharedStore) state(key string, now time.Time) gobreaker.State {
	if s.current(key) == nil {
		return gobreaker.StateClosed
	}
	s.mu.Lock()
	d := s.entries[key].decoded
	s.mu.Unlock()
	if !d.ok {
		return gobreaker.StateClosed
	}
	if d.st.State == gobreaker.StateOpen && d.st.Expiry.Before(now) {
		return gobreaker.StateHalfOpen
	}
	return d.st.State
}

// outcome notes a counted outcome of an attempt to the breaker under key
// (stateKey of its name), at now, for this instance's report, whatever
// the breaker's state: a success is evidence of the destination's health
// even when it lands after the breaker opened. For a success, it reports
// whether gobreaker may leave it uncounted, because counting it would
// change nothing the breaker decides by: the state is closed, with no
// failure in its run (the sender's ReadyToTrip reads ConsecutiveFailures
// alone, and a closed breaker has no interval to roll). That spares
// gobreaker's two JSON round trips on nearly every delivery; its
// Requests and TotalSuccesses leave these successes out. A failure
// counted concurrently is ordered after it, as it could have been.
func (s *sharedStore) outcome(key string, success bool, now time.Time) (steady bool) {
	s.mu.Lock()
	e := s.entryLocked(key)
	if success {
		e.report.OK, e.report.Failing = now, time.Time{}
		steady = e.data != nil && e.decoded.ok && e.decoded.st.State == gobreaker.StateClosed &&
			e.decoded.st.Counts.ConsecutiveFailures == 0
	} else if e.report.Failing.IsZero() {
		e.report.Failing = now
	}
	poke := s.remote != nil && s.markLocked(e)
	s.mu.Unlock()
	if poke {
		s.poke()
	}
	return steady
}

// nextShared is the shared state that instance self's report r, with its
// breaker's transition tr (nil: none), makes of board b at now; nil when
// b's stays.
//
//   - Its opening opens the shared breaker unless that is open already,
//     or another instance vouches for the destination, or a success of
//     its own has come since (r is no longer failing).
//   - Its closing (a trial went through) closes an open shared breaker.
//   - A success since the failures that opened the shared breaker began
//     closes it: it opened on one instance's failures, not the
//     destination's.
func nextShared(b Board, self string, r Report, tr *Shared, now time.Time) *Shared {
	sh := b.Shared
	open := sh.State == gobreaker.StateOpen
	switch {
	case tr != nil && tr.State == gobreaker.StateOpen:
		if r.Failing.IsZero() || open && sh.Expiry.After(now) || vouched(b, self, r.Failing, now) {
			return nil
		}
		return &Shared{Gen: sh.Gen + 1, State: gobreaker.StateOpen, Expiry: tr.Expiry, Since: r.Failing}
	case tr != nil:
		if !open {
			return nil
		}
		return &Shared{Gen: sh.Gen + 1, State: gobreaker.StateClosed}
	case undoes(sh, r, now):
		return &Shared{Gen: sh.Gen + 1, State: gobreaker.StateClosed}
	}
	return nil
}

// vouched reports whether an instance other than self vouches, in b, for
// a destination that self has failed since since: its latest outcome is a
// success, made since then or within vouchWindow of now.
func vouched(b Board, self string, since, now time.Time) bool {
	for id, r := range b.Reports {
		if id != self && r.Failing.IsZero() && !r.OK.IsZero() && (!r.OK.Before(since) || now.Sub(r.OK) < vouchWindow) {
			return true
		}
	}
	return false
}

// undoes reports whether report r, a success since the failures that
// opened sh began, undoes sh's opening at now.
func undoes(sh Shared, r Report, now time.Time) bool {
	return sh.State == gobreaker.StateOpen && sh.Expiry.After(now) && r.Failing.IsZero() && !r.OK.IsZero() && !r.OK.Before(sh.Since)
}

// run merges this instance's reports and transitions into the remote
// until ctx ends, at most one round per interval.
func (s *sharedStore) run(ctx context.Context, interval time.Duration) {
	if s.remote == nil {
		return
	}
	for {
		select {
		case <-ctx.Done():
			s.push() // what this instance last knew
			return
		case <-s.flush:
		}
		s.push()
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			s.push()
			return
		case <-t.C:
		}
	}
}

// push puts every marked entry's report and transition.
func (s *sharedStore) push() {
	type pending struct {
		name   string
		report Report
		tr     *Shared
		board  Board
		gen    uint64
	}
	var ps []pending
	s.mu.Lock()
	for name, e := range s.entries {
		if e.dirty {
			ps = append(ps, pending{name, e.report, e.transition, e.board, e.gen})
			e.dirty, e.transition = false, nil
		}
	}
	s.mu.Unlock()
	for _, p := range ps {
		if again, err := s.put(p.name, p.report, p.tr, p.board); again || err != nil {
			s.mu.Lock()
			if e := s.entries[p.name]; e.gen == p.gen { // try again at the next round
				e.dirty = true
				if e.transition == nil {
					e.transition = p.tr
				}
			}
			s.mu.Unlock()
			s.poke()
		}
	}
}

// put puts this instance's report r on the breaker called name, with its
// transition tr, b being the board last read. A transition, or a success
// that may undo the shared opening, is decided on the board as it is
// then (nextShared), and stored if no other instance changed the shared
// state meanwhile; else it is decided again, three times at most (then
// the refresh follows what the others decided).
//
// An opening that another instance vouches for is proposed again at the
// next round (again), for vouchWindow after it: the instance that vouched
// may be failing too, its report not yet put (two instances that open at
// once each read the other's report from before).
func (s *sharedStore) put(name string, r Report, tr *Shared, b Board) (again bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	now := s.now()
	r.At = now
	u := Update{Instance: s.self, Report: r, Keep: s.keep}
	for id, o := range b.Reports {
		if id != s.self && now.Sub(o.At) > forgetAfter {
			u.Forget = append(u.Forget, id)
		}
	}
	if tr == nil && !undoes(b.Shared, r, now) {
		_, err := s.remote.Put(ctx, name, u)
		return false, err
	}
	for range 3 {
		fresh, err := s.remote.Load(ctx, name)
		if err != nil {
			return false, err
		}
		u.Gen, u.Next = fresh.Shared.Gen, nextShared(fresh, s.self, r, tr, now)
		stored, err := s.remote.Put(ctx, name, u)
		if err != nil {
			return false, err
		}
		if u.Next != nil && !stored {
			continue
		}
		again = u.Next == nil && tr != nil && tr.State == gobreaker.StateOpen && !r.Failing.IsZero() &&
			now.Sub(tr.Since) < vouchWindow && vouched(fresh, s.self, r.Failing, now)
		s.mu.Lock()
		e := s.entryLocked(name)
		if stored {
			fresh.Shared = *u.Next
		}
		if stored && tr != nil && e.gen < u.Next.Gen {
			e.gen, e.board = u.Next.Gen, fresh // its own transition: followed already
		} else {
			s.followLocked(e, fresh)
		}
		s.mu.Unlock()
		return again, nil
	}
	return false, nil
}

var _ gobreaker.SharedDataStore = (*sharedStore)(nil)
