package sender

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The board is what the instances of a destination share about its
// breaker, through a Remote: the shared state and each instance's
// report. This file holds its types, their text, and the merge of an
// instance's report and transitions into it (breaker.go holds each
// instance's own breaker, which follows it).

// Remote is where the breakers' shared state and the instances' reports
// live: Redis, for instances that share the work. A breaker is called by
// its destination's name.
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
	Gen  uint64
	Open bool // else closed
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

// The shared state and the reports are hookgate's own, and so is their
// text, which a Remote may store as it is (MarshalText, UnmarshalText):
//
//	Shared  "<gen> open|closed <expiry> <since>"
//	Report  "<ok> <failing> <at>"
//
// with times in unix milliseconds, 0 for the zero time. The generation
// leads, in decimal digits: a Remote that stores the next state only
// over the generation it follows (Update.Gen) reads it there.

// MarshalText implements encoding.TextMarshaler.
func (sh Shared) MarshalText() ([]byte, error) {
	b := strconv.AppendUint(nil, sh.Gen, 10)
	if sh.Open {
		b = append(b, " open "...)
	} else {
		b = append(b, " closed "...)
	}
	return appendMillis(b, sh.Expiry, sh.Since), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (sh *Shared) UnmarshalText(text []byte) error {
	f := strings.Fields(string(text))
	if len(f) != 4 || (f[1] != "open" && f[1] != "closed") {
		return fmt.Errorf("breaker state %q: want <gen> open|closed <expiry> <since>", text)
	}
	gen, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return fmt.Errorf("breaker state %q: generation: %w", text, err)
	}
	t, err := parseMillis(f[2:])
	if err != nil {
		return fmt.Errorf("breaker state %q: %w", text, err)
	}
	*sh = Shared{Gen: gen, Open: f[1] == "open", Expiry: t[0], Since: t[1]}
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (r Report) MarshalText() ([]byte, error) {
	return appendMillis(nil, r.OK, r.Failing, r.At), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (r *Report) UnmarshalText(text []byte) error {
	f := strings.Fields(string(text))
	if len(f) != 3 {
		return fmt.Errorf("breaker report %q: want <ok> <failing> <at>", text)
	}
	t, err := parseMillis(f)
	if err != nil {
		return fmt.Errorf("breaker report %q: %w", text, err)
	}
	*r = Report{OK: t[0], Failing: t[1], At: t[2]}
	return nil
}

// appendMillis appends ts in unix milliseconds (0 for the zero time),
// space-separated.
func appendMillis(b []byte, ts ...time.Time) []byte {
	for i, t := range ts {
		if i > 0 {
			b = append(b, ' ')
		}
		if t.IsZero() {
			b = append(b, '0')
		} else {
			b = strconv.AppendInt(b, t.UnixMilli(), 10)
		}
	}
	return b
}

// parseMillis reads unix milliseconds (0: the zero time).
func parseMillis(f []string) ([]time.Time, error) {
	out := make([]time.Time, len(f))
	for i, v := range f {
		m, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("time %q: not unix milliseconds", v)
		}
		if m != 0 {
			out[i] = time.UnixMilli(m)
		}
	}
	return out, nil
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
	open := sh.Open
	switch {
	case tr != nil && tr.Open:
		if r.Failing.IsZero() || open && sh.Expiry.After(now) || vouched(b, self, r.Failing, now) {
			return nil
		}
		return &Shared{Gen: sh.Gen + 1, Open: true, Expiry: tr.Expiry, Since: r.Failing}
	case tr != nil:
		if !open {
			return nil
		}
		return &Shared{Gen: sh.Gen + 1}
	case undoes(sh, r, now):
		return &Shared{Gen: sh.Gen + 1}
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
	return sh.Open && sh.Expiry.After(now) && r.Failing.IsZero() && !r.OK.IsZero() && !r.OK.Before(sh.Since)
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
			if e := s.entries[p.name]; e != nil && e.gen == p.gen { // try again at the next round
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
		again = u.Next == nil && tr != nil && tr.Open && !r.Failing.IsZero() &&
			now.Sub(tr.Since) < vouchWindow && vouched(fresh, s.self, r.Failing, now)
		s.mu.Lock()
		e := s.entries[name]
		if e == nil { // removed meanwhile
			s.mu.Unlock()
			return false, nil
		}
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
