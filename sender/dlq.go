package sender

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// The dead letters of the settled envelopes' service (Settled; history.go
// holds the rest): one implementation behind the admin API, the CLI and
// the console. A dead letter is a state change its receiver never got; an
// operator lists and groups them, inspects one, and redrives a bounded
// batch (with a redrive ID and an audit record), or purges.

// Filter selects dead letters. Zero fields match everything.
type Filter struct {
	Destination string `json:"destination,omitempty"`
	// Tenant keeps the tenant's destinations only (TenantOf).
	Tenant string    `json:"tenant,omitempty"`
	Class  string    `json:"class,omitempty"`
	Since  time.Time `json:"since,omitzero"` // dead at or after
	Until  time.Time `json:"until,omitzero"` // dead before
	IDs    []string  `json:"ids,omitempty"`
}

func (f Filter) matches(e *Meta) bool {
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

// Redrive is a redrive's audit record and progress; a resend's too.
type Redrive struct {
	ID string `json:"redrive_id"`
	// Kind is "resend" for a resend of what the history keeps, "" for a
	// redrive of dead letters.
	Kind   string `json:"kind,omitempty"`
	Filter Filter `json:"filter"`
	// Resend is a resend's query (its Filter names only its destination).
	Resend  *HistoryQuery `json:"resend,omitempty"`
	Limit   int           `json:"limit"`
	Matched int           `json:"matched"`
	// More is set when more match than Matched counts (a resend counts
	// up to its bound): Matched is then a lower bound.
	More  bool      `json:"more,omitempty"`
	Moved int       `json:"moved"`
	By    string    `json:"by"`
	At    time.Time `json:"at"`
	// Error is set when the store failed part-way: Moved is then what
	// moved before it did.
	Error string `json:"error,omitempty"`
	// Letters are the destination and ID of each envelope moved.
	Letters []Letter `json:"letters,omitempty"`
	// Progress, read from the queue's counts when the record is read:
	// the rest of Moved is pending.
	Delivered  int `json:"delivered"`
	DeadAgain  int `json:"dead_again"`
	Superseded int `json:"superseded"`
	Pending    int `json:"pending"`
}

// Letter names one envelope a redrive moved. Outcome and LastError are
// read when the record is read (Progress), for the first letters only,
// never stored.
type Letter struct {
	Destination string `json:"destination"`
	ID          string `json:"id"`
	// Outcome is delivered, dead_again, superseded, pending, or gone
	// (purged, moved to another destination, or past the retention).
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

// DefaultMaxRedrive is the largest redrive one request may ask for.
const DefaultMaxRedrive = 10000

// Settled is the service over the settled envelopes: the dead letters
// (list, group, inspect, redrive, purge) and the delivery history (list,
// read, resend), which a redrive and a resend move back to the queue under
// one audit record. Ops wraps it for the doors.
type Settled struct {
	queue      AuditedQueue
	dests      func() []string // the configured destinations now
	maxRedrive int
	now        func() time.Time
}

// NewSettled returns the service over q for the configured destinations,
// which dests lists when called (Sender.Destinations); a redrive moves at most maxRedrive letters (0: the default).
// Dead letters of a destination the store holds but the configuration
// does not (an orphan: renamed, removed) stay readable and purgeable;
// they cannot be redriven.
func NewSettled(q AuditedQueue, dests func() []string, maxRedrive int, now func() time.Time) *Settled {
	if now == nil {
		now = time.Now
	}
	if maxRedrive <= 0 {
		maxRedrive = DefaultMaxRedrive
	}
	return &Settled{queue: q, dests: dests, maxRedrive: maxRedrive, now: now}
}

// MaxRedrive is the largest limit a redrive may ask for.
func (s *Settled) MaxRedrive() int { return s.maxRedrive }

// ErrBadFilter means a filter names an unknown destination or class.
var ErrBadFilter = errors.New("bad filter")

// ErrBadLimit means a redrive whose limit is not 1 to the maximum.
var ErrBadLimit = errors.New("bad limit")

// ErrOrphaned means a destination the store holds envelopes of but the
// configuration does not name: they are kept, never delivered, until
// they are moved to a configured destination or purged.
var ErrOrphaned = errors.New("destination is not configured")

// check resolves f's destinations: the named one, or every destination
// the store holds (configured first, in configuration order, then the
// orphans); configured only (redrive) limits them to the configured.
func (s *Settled) check(ctx context.Context, f Filter, configuredOnly bool) ([]string, error) {
	if f.Class != "" {
		if _, err := ParseClass(f.Class); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadFilter, err)
		}
	}
	if f.Tenant != "" && f.Destination != "" && TenantOf(f.Destination) != f.Tenant {
		return nil, fmt.Errorf("%w: unknown destination %q", ErrBadFilter, f.Destination)
	}
	configured := inTenant(s.dests(), f.Tenant)
	if f.Destination != "" && slices.Contains(configured, f.Destination) {
		return []string{f.Destination}, nil
	}
	if f.Destination == "" && configuredOnly {
		return configured, nil
	}
	orphans, err := Orphans(ctx, s.queue, s.dests())
	if err != nil {
		return nil, err
	}
	orphans = inTenant(orphans, f.Tenant)
	if f.Destination == "" {
		return append(configured, orphans...), nil
	}
	if !slices.Contains(orphans, f.Destination) {
		return nil, fmt.Errorf("%w: unknown destination %q", ErrBadFilter, f.Destination)
	}
	if configuredOnly {
		return nil, fmt.Errorf("%w: %q: move its letters to a configured destination first (hookgate destinations move)", ErrOrphaned, f.Destination)
	}
	return []string{f.Destination}, nil
}

// Orphans lists the destinations q holds anything of that are not among
// configured, in byte order.
func Orphans(ctx context.Context, q Queue, configured []string) ([]string, error) {
	all, err := q.Destinations(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range all {
		if !slices.Contains(configured, d) {
			out = append(out, d)
		}
	}
	return out, nil
}

// scanPage is how many dead letters a scan reads per store call.
const scanPage = 500

// each calls fn for the record of every dead letter of dests that f
// matches, in dead-at order per destination, until fn returns false.
func (s *Settled) each(ctx context.Context, dests []string, f Filter, fn func(*Meta) bool) error {
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

// eachID is each for a filter that names its IDs: their records are
// read, not every dead letter's.
func (s *Settled) eachID(ctx context.Context, dests []string, f Filter, fn func(*Meta) bool) error {
	ids := slices.Compact(slices.Sorted(slices.Values(f.IDs)))
	for _, dest := range dests {
		var found []*Meta
		for chunk := range slices.Chunk(ids, scanPage) {
			metas, err := s.queue.Metas(ctx, dest, chunk)
			if err != nil {
				return err
			}
			for _, m := range metas {
				if m.State == StateDead && f.matches(m) {
					found = append(found, m)
				}
			}
		}
		slices.SortStableFunc(found, func(a, b *Meta) int { return a.DeadAt.Compare(b.DeadAt) })
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
func (s *Settled) Summary(ctx context.Context, f Filter, upTo int) (groups []Group, total int, more bool, err error) {
	dests, err := s.check(ctx, f, false)
	if err != nil {
		return nil, 0, false, err
	}
	index := map[[2]string]int{}
	err = s.each(ctx, dests, f, func(e *Meta) bool {
		if upTo > 0 && total == upTo {
			more = true
			return false
		}
		k := [2]string{e.Destination, e.Class.String()}
		if e.Broken {
			k[1] = "broken"
		}
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
func (s *Settled) Count(ctx context.Context, f Filter, upTo int) (n int, more bool, err error) {
	dests, err := s.check(ctx, f, false)
	if err != nil {
		return 0, false, err
	}
	err = s.each(ctx, dests, f, func(*Meta) bool {
		if n == upTo {
			more = true
			return false
		}
		n++
		return true
	})
	return n, more, err
}

// List pages through the records of the dead letters f matches: up to
// limit from after the cursor ("" for the first page); next is "" after
// the last.
func (s *Settled) List(ctx context.Context, f Filter, limit int, cursor string) ([]*Meta, string, error) {
	dests, err := s.check(ctx, f, false)
	if err != nil {
		return nil, "", err
	}
	// The cursor is the position of the last entry returned: its
	// destination's name (query-escaped, so that it holds no "|") and the
	// queue's cursor within it.
	start, inner := 0, ""
	if cursor != "" {
		esc, rest, ok := strings.Cut(cursor, "|")
		name, err := url.QueryUnescape(esc)
		start = slices.Index(dests, name)
		if !ok || err != nil || start < 0 {
			return nil, "", fmt.Errorf("%w: bad cursor", ErrBadFilter)
		}
		inner = rest
	}
	var out []*Meta
	for di := start; di < len(dests); di++ {
		c := ""
		if di == start {
			c = inner
		}
		for {
			page, next, err := s.queue.Dead(ctx, dests[di], c, min(scanPage, limit+1))
			if err != nil {
				return nil, "", err
			}
			for _, e := range page {
				if !f.matches(e) {
					continue
				}
				out = append(out, e)
				if len(out) == limit {
					return out, fmt.Sprintf("%s|%d:%s", url.QueryEscape(dests[di]), e.DeadAt.UnixMilli(), e.ID), nil
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

// Get reads one envelope the queue holds, dead or not (a delivered one is
// the history's: ErrNotFound here): from dest, or from the first
// destination that holds the ID when dest is empty.
func (s *Settled) Get(ctx context.Context, dest, id string) (*Envelope, State, error) {
	dests, err := s.check(ctx, Filter{Destination: dest}, false)
	if err != nil {
		return nil, "", err
	}
	for _, d := range dests {
		e, state, err := s.queue.Get(ctx, d, id)
		if errors.Is(err, ErrNotFound) || (err == nil && state == StateDelivered) {
			continue
		}
		return e, state, err
	}
	return nil, "", ErrNotFound
}

// orphansMatch is ErrOrphaned, naming them, when f matches dead letters
// of orphaned destinations.
func (s *Settled) orphansMatch(ctx context.Context, f Filter) error {
	orphans, err := Orphans(ctx, s.queue, s.dests())
	if err != nil {
		return err
	}
	var hit []string
	for _, o := range orphans {
		found := false
		if err := s.each(ctx, []string{o}, f, func(*Meta) bool { found = true; return false }); err != nil {
			return err
		}
		if found {
			hit = append(hit, o)
		}
	}
	if len(hit) > 0 {
		return fmt.Errorf("%w: the filter matches dead letters of %s, which the config no longer names: move them to a configured destination first (hookgate destinations move), or name a configured destination", ErrOrphaned, strings.Join(hit, ", "))
	}
	return nil
}

// redriveBatch is how many letters one store call moves.
const redriveBatch = 200

// Redrive moves the dead letters f matches, up to limit (1 to the
// maximum), back to the queue under a new redrive ID, and keeps the audit
// record. A dry run counts what matches and moves nothing. It acts on
// everything matched up to the limit, not only on a page.
//
// The record is written before anything moves; from then on the move
// runs to its end even when ctx is cancelled (the client left), and the
// record ends with the true count moved. A store error part-way returns
// the record (its ID, what moved) with the error, and keeps that on
// record too.
func (s *Settled) Redrive(ctx context.Context, f Filter, limit int, by string, dryRun bool) (*Redrive, error) {
	if limit <= 0 || limit > s.maxRedrive {
		return nil, fmt.Errorf("%w: %d; want 1 to %d (max_redrive)", ErrBadLimit, limit, s.maxRedrive)
	}
	dests, err := s.check(ctx, f, true)
	if err != nil {
		return nil, err
	}
	if f.Destination == "" {
		// A filter that matches an orphan's letters would leave them out
		// without a word: it is refused, and names them.
		if err := s.orphansMatch(ctx, f); err != nil {
			return nil, err
		}
	}
	r := &Redrive{Filter: f, Limit: limit, By: by, At: s.now()}
	var picked []Letter
	err = s.each(ctx, dests, f, func(e *Meta) bool {
		if e.Broken {
			return true // never sent: found and purged as such
		}
		r.Matched++
		if len(picked) < limit {
			picked = append(picked, Letter{Destination: e.Destination, ID: e.ID})
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	if dryRun || len(picked) == 0 {
		return r, nil
	}
	if err := s.move(ctx, r, dests, picked, "redrive", s.queue.Redrive); err != nil {
		if r.ID == "" {
			return nil, err // nothing moved: the record was refused
		}
		return r, err
	}
	return r, nil
}

// move runs a redrive or a resend of picked, in dests' order and in
// chunks, under a new redrive ID. The record is written before anything
// moves, so that one that fails half-way is on record under its ID, and a
// store that refuses the record moves nothing; from then on it runs to
// its end even when ctx is cancelled (the client left), and the record
// ends with what moved (a letter purged or moved meanwhile is not this
// one's). A store error part-way is kept on record and returned, with r.
func (s *Settled) move(ctx context.Context, r *Redrive, dests []string, picked []Letter, what string,
	moveFn func(ctx context.Context, dest string, ids []string, redriveID string, now time.Time) ([]string, error)) error {
	r.ID = newRedriveID()
	if err := s.queue.PutRedrive(ctx, r); err != nil {
		r.ID = ""
		return err
	}
	ctx = context.WithoutCancel(ctx)
	byDest := map[string][]string{}
	for _, l := range picked {
		byDest[l.Destination] = append(byDest[l.Destination], l.ID)
	}
	var moveErr error
	for _, dest := range dests {
		for chunk := range slices.Chunk(byDest[dest], redriveBatch) {
			moved, err := moveFn(ctx, dest, chunk, r.ID, s.now())
			for _, id := range moved {
				r.Letters = append(r.Letters, Letter{Destination: dest, ID: id})
			}
			r.Moved += len(moved)
			if err != nil {
				moveErr = err
				break
			}
		}
		if moveErr != nil {
			break
		}
	}
	if moveErr != nil {
		r.Error = moveErr.Error()
	}
	if err := s.queue.PutRedrive(ctx, r); err != nil && moveErr == nil {
		moveErr = fmt.Errorf("its audit record could not be completed: %w", err)
	}
	if moveErr != nil {
		return fmt.Errorf("%s %s moved %d of %d: %w", what, r.ID, r.Moved, len(picked), moveErr)
	}
	return nil
}

// progressLetters is how many of a redrive's letters Progress reads the
// outcome of: a page to show, never the whole redrive.
const progressLetters = 100

// Progress reads a redrive's record and what became of the envelopes it
// moved, from the queue's counts: delivered, dead again (under this
// redrive), superseded (moved again by a later redrive), and the rest
// pending; and the outcome of the first letters, for a page to show. With
// a scope, a record of a redrive that was not confined to it (to its
// destination, or to a destination or the filter of its tenant) is
// ErrNotFound, before anything else is read.
func (s *Settled) Progress(ctx context.Context, id string, scope Scope) (*Redrive, error) {
	r, err := s.queue.GetRedrive(ctx, id)
	if err != nil {
		return nil, err
	}
	if !scope.IsZero() && !scope.Sees(r.Filter.Destination) && (scope.Tenant == "" || r.Filter.Tenant != scope.Tenant) {
		return nil, ErrNotFound
	}
	dests := []string{r.Filter.Destination}
	if r.Filter.Destination == "" {
		// Its letters may have been moved since: every destination's
		// counts.
		if dests, err = s.queue.Destinations(ctx); err != nil {
			return nil, err
		}
	}
	r.Delivered, r.DeadAgain, r.Superseded = 0, 0, 0
	for _, d := range dests {
		c, err := s.queue.RedriveCounts(ctx, d, id)
		if err != nil {
			return nil, err
		}
		r.Delivered += c.Delivered
		r.DeadAgain += c.DeadAgain
		r.Superseded += c.Superseded
	}
	r.Pending = max(0, r.Moved-r.Delivered-r.DeadAgain-r.Superseded)
	shown := r.Letters[:min(len(r.Letters), progressLetters)]
	byDest := map[string][]string{}
	for _, l := range shown {
		byDest[l.Destination] = append(byDest[l.Destination], l.ID)
	}
	found := map[[2]string]*Meta{}
	for d, ids := range byDest {
		metas, err := s.queue.Metas(ctx, d, ids)
		if err != nil {
			return nil, err
		}
		for _, m := range metas {
			found[[2]string{d, m.ID}] = m
		}
	}
	for i := range shown {
		l := &shown[i]
		m := found[[2]string{l.Destination, l.ID}]
		switch {
		case m == nil:
			l.Outcome = "gone" // purged, moved away, or trimmed
		case m.State == StateDelivered:
			l.Outcome = "delivered"
		case m.RedriveID != id:
			l.Outcome = "superseded"
		case m.State == StateDead:
			l.Outcome, l.LastError = "dead_again", m.LastError
		default:
			l.Outcome = "pending"
		}
	}
	return r, nil
}

// purgeBatch is how many letters one store call purges.
const purgeBatch = 500

// ErrNoFilter means a purge whose filter is empty (it would remove every
// dead letter) and that did not say All.
var ErrNoFilter = errors.New("no filter")

// PurgeOptions bound a purge.
type PurgeOptions struct {
	// Limit is the most removed: 1 to the maximum (max_redrive), as a
	// redrive's. 0 is allowed when the filter names its IDs (they bound
	// it: the maximum applies) or on a dry run.
	Limit int
	// All must be set for an empty filter, and only for one: a purge of
	// every dead letter is said, never implied.
	All bool
	// DryRun counts what matches and removes nothing.
	DryRun bool
}

// PurgeResult is what a purge matched and removed.
type PurgeResult struct {
	Matched int `json:"matched"`
	Removed int `json:"removed"`
}

// IsZero reports whether f matches every dead letter.
func (f Filter) IsZero() bool {
	return f.Destination == "" && f.Class == "" && f.Since.IsZero() && f.Until.IsZero() && len(f.IDs) == 0
}

// Purge deletes up to o.Limit of the dead letters f matches, each
// destination's oldest first, destinations in configuration order, then
// the orphans; Matched counts all it matches. A dry run counts and
// removes nothing. An empty filter without o.All is ErrNoFilter, o.All
// with a filter ErrBadFilter, and a limit out of range ErrBadLimit:
// nothing is removed.
func (s *Settled) Purge(ctx context.Context, f Filter, o PurgeOptions) (PurgeResult, error) {
	var r PurgeResult
	switch {
	case f.IsZero() && !o.All:
		return r, fmt.Errorf("%w: a purge with no filter removes every dead letter: say all, or filter by destination, class, time or ID", ErrNoFilter)
	case o.All && !f.IsZero():
		return r, fmt.Errorf("%w: all means every dead letter; it takes no filter", ErrBadFilter)
	case o.Limit < 0 || o.Limit > s.maxRedrive || o.Limit == 0 && len(f.IDs) == 0 && !o.DryRun:
		return r, fmt.Errorf("%w: %d; want 1 to %d (max_redrive)", ErrBadLimit, o.Limit, s.maxRedrive)
	}
	limit := o.Limit
	if limit == 0 {
		limit = s.maxRedrive
	}
	dests, err := s.check(ctx, f, false)
	if err != nil {
		return r, err
	}
	byDest := map[string][]string{}
	picked := 0
	if err := s.each(ctx, dests, f, func(e *Meta) bool {
		r.Matched++
		if picked < limit {
			byDest[e.Destination] = append(byDest[e.Destination], e.ID)
			picked++
		}
		return true
	}); err != nil {
		return r, err
	}
	if o.DryRun {
		return r, nil
	}
	for _, dest := range dests {
		for chunk := range slices.Chunk(byDest[dest], purgeBatch) {
			n, err := s.queue.Purge(ctx, dest, chunk)
			r.Removed += n
			if err != nil {
				return r, err
			}
		}
	}
	return r, nil
}

func newRedriveID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return "rd_" + hex.EncodeToString(b)
}
