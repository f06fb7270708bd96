package sender

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"
)

// The dead-letter service: one implementation behind the admin API and
// the CLI. A dead letter is a state change its receiver never got; an
// operator lists and groups them, inspects one, and redrives a bounded
// batch (with a redrive ID and an audit record), or purges.

// Filter selects dead letters. Zero fields match everything.
type Filter struct {
	Destination string    `json:"destination,omitempty"`
	Class       string    `json:"class,omitempty"`
	Since       time.Time `json:"since,omitzero"` // dead at or after
	Until       time.Time `json:"until,omitzero"` // dead before
	IDs         []string  `json:"ids,omitempty"`
}

func (f Filter) matches(e *Envelope) bool {
	switch {
	case f.Class != "" && e.Class.String() != f.Class:
		return false
	case !f.Since.IsZero() && e.DeadAt.Before(f.Since):
		return false
	case !f.Until.IsZero() && !e.DeadAt.Before(f.Until):
		return false
	case len(f.IDs) > 0 && !slices.Contains(f.IDs, e.ID):
		return false
	}
	return true
}

// Redrive is a redrive's audit record and progress.
type Redrive struct {
	ID      string    `json:"redrive_id"`
	Filter  Filter    `json:"filter"`
	Limit   int       `json:"limit"`
	Matched int       `json:"matched"`
	Moved   int       `json:"moved"`
	By      string    `json:"by"`
	At      time.Time `json:"at"`
	// Letters are the destination and ID of each envelope moved.
	Letters []Letter `json:"letters,omitempty"`
	// Progress, computed when read.
	Delivered int `json:"delivered"`
	DeadAgain int `json:"dead_again"`
	Pending   int `json:"pending"`
}

// Letter names one envelope a redrive moved. Outcome and LastError are
// computed when the record is read (Progress), never stored.
type Letter struct {
	Destination string `json:"destination"`
	ID          string `json:"id"`
	// Outcome is delivered, dead_again or pending.
	Outcome   string `json:"outcome,omitempty"`
	LastError string `json:"last_error,omitempty"`
}

// Audit keeps redrive records; both queues provide it.
type Audit interface {
	PutRedrive(ctx context.Context, r *Redrive) error
	// GetRedrive reads a record; ErrNotFound when there is none.
	GetRedrive(ctx context.Context, id string) (*Redrive, error)
}

// Group counts the dead letters of one destination and class.
type Group struct {
	Destination  string    `json:"destination"`
	Class        string    `json:"class"`
	Count        int       `json:"count"`
	OldestDeadAt time.Time `json:"oldest_dead_at"`
}

// AuditedQueue is a queue that keeps redrive records: both backends are.
type AuditedQueue interface {
	Queue
	Audit
}

// DLQ is the dead-letter service.
type DLQ struct {
	queue AuditedQueue
	dests []string
	now   func() time.Time
}

// NewDLQ returns the service over q for the named destinations.
func NewDLQ(q AuditedQueue, dests []string, now func() time.Time) *DLQ {
	if now == nil {
		now = time.Now
	}
	return &DLQ{queue: q, dests: dests, now: now}
}

// ErrBadFilter means a filter names an unknown destination or class.
var ErrBadFilter = errors.New("bad filter")

// ErrBadLimit means a redrive without a positive limit.
var ErrBadLimit = errors.New("a redrive needs a positive limit")

func (s *DLQ) check(f Filter) ([]string, error) {
	if f.Class != "" {
		if _, err := ParseClass(f.Class); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadFilter, err)
		}
	}
	if f.Destination == "" {
		return s.dests, nil
	}
	if !slices.Contains(s.dests, f.Destination) {
		return nil, fmt.Errorf("%w: unknown destination %q", ErrBadFilter, f.Destination)
	}
	return []string{f.Destination}, nil
}

// scanPage is how many dead letters a scan reads per store call.
const scanPage = 500

// each calls fn for every dead letter of dests that f matches, in
// dead-at order per destination, until fn returns false.
func (s *DLQ) each(ctx context.Context, dests []string, f Filter, fn func(*Envelope) bool) error {
	if len(f.IDs) > 0 {
		return s.eachID(ctx, dests, f, fn)
	}
	for _, dest := range dests {
		cursor := ""
		for {
			page, next, err := s.queue.Dead(ctx, dest, cursor, scanPage)
			if err != nil {
				return err
			}
			for _, e := range page {
				if f.matches(e) && !fn(e) {
					return nil
				}
			}
			if next == "" {
				break
			}
			cursor = next
		}
	}
	return nil
}

// eachID is each for a filter that names its IDs: a read per ID and
// destination, not a scan of every dead letter.
func (s *DLQ) eachID(ctx context.Context, dests []string, f Filter, fn func(*Envelope) bool) error {
	for _, dest := range dests {
		var found []*Envelope
		for _, id := range slices.Compact(slices.Sorted(slices.Values(f.IDs))) {
			e, state, err := s.queue.Get(ctx, dest, id)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if state == StateDead && f.matches(e) {
				found = append(found, e)
			}
		}
		slices.SortStableFunc(found, func(a, b *Envelope) int { return a.DeadAt.Compare(b.DeadAt) })
		for _, e := range found {
			if !fn(e) {
				return nil
			}
		}
	}
	return nil
}

// Summary groups the dead letters by destination and class. With upTo
// above 0 it groups at most that many, the oldest of each destination
// first, and more reports that there are others.
func (s *DLQ) Summary(ctx context.Context, f Filter, upTo int) (groups []Group, total int, more bool, err error) {
	dests, err := s.check(f)
	if err != nil {
		return nil, 0, false, err
	}
	index := map[[2]string]int{}
	err = s.each(ctx, dests, f, func(e *Envelope) bool {
		if upTo > 0 && total == upTo {
			more = true
			return false
		}
		k := [2]string{e.Destination, e.Class.String()}
		i, ok := index[k]
		if !ok {
			i = len(groups)
			index[k] = i
			groups = append(groups, Group{Destination: k[0], Class: k[1], OldestDeadAt: e.DeadAt})
		}
		groups[i].Count++
		if e.DeadAt.Before(groups[i].OldestDeadAt) {
			groups[i].OldestDeadAt = e.DeadAt
		}
		total++
		return true
	})
	return groups, total, more, err
}

// Count counts the dead letters f matches, stopping at upTo: more reports
// that there are more than upTo.
func (s *DLQ) Count(ctx context.Context, f Filter, upTo int) (n int, more bool, err error) {
	dests, err := s.check(f)
	if err != nil {
		return 0, false, err
	}
	err = s.each(ctx, dests, f, func(*Envelope) bool {
		if n == upTo {
			more = true
			return false
		}
		n++
		return true
	})
	return n, more, err
}

// List pages through the dead letters f matches: up to limit from after
// the cursor ("" for the first page); next is "" after the last.
func (s *DLQ) List(ctx context.Context, f Filter, limit int, cursor string) ([]*Envelope, string, error) {
	dests, err := s.check(f)
	if err != nil {
		return nil, "", err
	}
	// The cursor is the position of the last entry returned: its
	// destination's index and the queue's cursor within it.
	start, inner := 0, ""
	if cursor != "" {
		if _, err := fmt.Sscanf(cursor, "%d|", &start); err != nil || start < 0 || start >= len(dests) {
			return nil, "", fmt.Errorf("%w: bad cursor", ErrBadFilter)
		}
		inner = cursor[len(fmt.Sprint(start))+1:]
	}
	var out []*Envelope
	for di := start; di < len(dests); di++ {
		c := ""
		if di == start {
			c = inner
		}
		for {
			page, next, err := s.queue.Dead(ctx, dests[di], c, scanPage)
			if err != nil {
				return nil, "", err
			}
			for _, e := range page {
				if !f.matches(e) {
					continue
				}
				out = append(out, e)
				if len(out) == limit {
					return out, fmt.Sprintf("%d|%d:%s", di, e.DeadAt.UnixMilli(), e.ID), nil
				}
			}
			if next == "" {
				break
			}
			c = next
		}
	}
	return out, "", nil
}

// Get reads one envelope, dead or not: from dest, or from the first
// destination that holds the ID when dest is empty.
func (s *DLQ) Get(ctx context.Context, dest, id string) (*Envelope, State, error) {
	dests, err := s.check(Filter{Destination: dest})
	if err != nil {
		return nil, "", err
	}
	for _, d := range dests {
		e, state, err := s.queue.Get(ctx, d, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		return e, state, err
	}
	return nil, "", ErrNotFound
}

// Redrive moves the dead letters f matches, up to limit, back to the
// queue under a new redrive ID, and keeps the audit record. A dry run
// counts what matches and moves nothing. It acts on everything matched up
// to the limit, not only on a page.
func (s *DLQ) Redrive(ctx context.Context, f Filter, limit int, by string, dryRun bool) (*Redrive, error) {
	dests, err := s.check(f)
	if err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, ErrBadLimit
	}
	r := &Redrive{Filter: f, Limit: limit, By: by, At: s.now()}
	var picked []Letter
	err = s.each(ctx, dests, f, func(e *Envelope) bool {
		r.Matched++
		if len(picked) < limit {
			picked = append(picked, Letter{Destination: e.Destination, ID: e.ID})
		}
		return true
	})
	if err != nil || dryRun || len(picked) == 0 {
		return r, err
	}
	r.ID = newRedriveID()
	// The record is written before anything moves, so a redrive that
	// fails half-way is on record under its ID, and a store that refuses
	// the record moves nothing.
	if err := s.queue.PutRedrive(ctx, r); err != nil {
		r.ID = ""
		return r, err
	}
	byDest := map[string][]string{}
	for _, l := range picked {
		byDest[l.Destination] = append(byDest[l.Destination], l.ID)
	}
	// The record names what moved: a letter purged or redriven meanwhile
	// is not this redrive's.
	for _, dest := range dests {
		ids := byDest[dest]
		for len(ids) > 0 {
			chunk := ids[:min(len(ids), 200)]
			ids = ids[len(chunk):]
			moved, err := s.queue.Redrive(ctx, dest, chunk, r.ID, s.now())
			for _, id := range moved {
				r.Letters = append(r.Letters, Letter{Destination: dest, ID: id})
			}
			r.Moved += len(moved)
			if err != nil {
				s.queue.PutRedrive(ctx, r)
				return r, err
			}
		}
	}
	if err := s.queue.PutRedrive(ctx, r); err != nil {
		return r, fmt.Errorf("redrive %s moved %d but its audit record failed: %w", r.ID, r.Moved, err)
	}
	return r, nil
}

// Progress reads a redrive's record and what became of each envelope it
// moved: delivered (gone from the queue), dead again (under this
// redrive), or pending. With a scope, a record of a redrive that was not
// confined to that destination is ErrNotFound, before any letter is read.
func (s *DLQ) Progress(ctx context.Context, id, scope string) (*Redrive, error) {
	r, err := s.queue.GetRedrive(ctx, id)
	if err != nil {
		return nil, err
	}
	if scope != "" && r.Filter.Destination != scope {
		return nil, ErrNotFound
	}
	r.Delivered, r.DeadAgain, r.Pending = 0, 0, 0
	for i := range r.Letters {
		l := &r.Letters[i]
		e, state, err := s.queue.Get(ctx, l.Destination, l.ID)
		switch {
		case errors.Is(err, ErrNotFound):
			r.Delivered++
			l.Outcome = "delivered"
		case err != nil:
			return nil, err
		case state == StateDead && e.RedriveID == id:
			r.DeadAgain++
			l.Outcome, l.LastError = "dead_again", e.LastError
		default:
			r.Pending++
			l.Outcome = "pending"
		}
	}
	return r, nil
}

// Purge deletes the dead letters f matches; it answers how many went.
func (s *DLQ) Purge(ctx context.Context, f Filter) (int, error) {
	dests, err := s.check(f)
	if err != nil {
		return 0, err
	}
	byDest := map[string][]string{}
	if err := s.each(ctx, dests, f, func(e *Envelope) bool {
		byDest[e.Destination] = append(byDest[e.Destination], e.ID)
		return true
	}); err != nil {
		return 0, err
	}
	removed := 0
	for dest, ids := range byDest {
		n, err := s.queue.Purge(ctx, dest, ids)
		removed += n
		if err != nil {
			return removed, err
		}
	}
	return removed, nil
}

func newRedriveID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return "rd_" + hex.EncodeToString(b)
}
