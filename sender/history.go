package sender

// The delivery history service: what settled, searched across
// destinations newest first, and resent. It shares the dead-letter
// service's audit records and progress: a resend is a redrive of what
// was delivered.

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// HistoryQuery selects settled envelopes across destinations. Zero fields
// match everything.
type HistoryQuery struct {
	Destination string `json:"destination,omitempty"`
	// Tenant keeps the tenant's destinations only (TenantOf).
	Tenant    string    `json:"tenant,omitempty"`
	EventType string    `json:"event_type,omitempty"`
	Entity    string    `json:"entity,omitempty"`
	ID        string    `json:"id,omitempty"`
	IDs       []string  `json:"ids,omitempty"` // any of these (a resend's list)
	State     State     `json:"state,omitempty"`
	Since     time.Time `json:"since,omitzero"` // settled at or after
	Until     time.Time `json:"until,omitzero"` // settled before
}

func (q HistoryQuery) filter() HistoryFilter {
	return HistoryFilter{ID: q.ID, IDs: q.IDs, EventType: q.EventType, Entity: q.Entity, State: q.State, Since: q.Since, Until: q.Until}
}

func (q HistoryQuery) check() error {
	switch {
	case q.State != "" && q.State != StateDelivered && q.State != StateDead:
		return fmt.Errorf("%w: state %q: want delivered or dead", ErrBadFilter, q.State)
	case !q.Since.IsZero() && !q.Until.IsZero() && !q.Since.Before(q.Until):
		return fmt.Errorf("%w: since is not before until", ErrBadFilter)
	}
	return nil
}

// historyDests are the destinations a query reads: its own (configured,
// or one the store holds: an orphan's history stays readable), or every
// configured one.
func (s *Settled) historyDests(ctx context.Context, q HistoryQuery) ([]string, error) {
	if q.Destination == "" {
		return inTenant(s.dests(), q.Tenant), nil
	}
	if q.Tenant != "" && TenantOf(q.Destination) != q.Tenant {
		return nil, fmt.Errorf("%w %q", ErrUnknownDestination, q.Destination)
	}
	if slices.Contains(s.dests(), q.Destination) {
		return []string{q.Destination}, nil
	}
	known, err := s.queue.Destinations(ctx)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(known, q.Destination) {
		return nil, fmt.Errorf("%w %q", ErrUnknownDestination, q.Destination)
	}
	return []string{q.Destination}, nil
}

// History lists the settled envelopes q matches, newest first across its
// destinations, at most limit, after the cursor ("": from the newest);
// next is "" at the end. It reads each destination a slice at a time
// (limit over the destinations) and merges them, so what it reads is
// about what it lists, plus a slice per destination that the next page
// reads again: not limit per destination. It keeps reading past entries
// that do not match, within a bound (two store calls per destination and
// historyReads more, each looking at a bounded number of entries): a page
// may hold fewer than limit, even none, with more to come, and then its
// next is where to go on. Paging is stable while envelopes settle. It
// reads no payload. With State StateQueued it lists what has not settled
// yet instead, in one page (see pending).
func (s *Settled) History(ctx context.Context, q HistoryQuery, cursor string, limit int) ([]*Meta, string, error) {
	if q.State == StateQueued {
		return s.pending(ctx, q, cursor, limit)
	}
	if q.State != "" && q.State != StateDelivered && q.State != StateDead {
		return nil, "", fmt.Errorf("%w: state %q: want delivered, dead or queued", ErrBadFilter, q.State)
	}
	if err := q.check(); err != nil {
		return nil, "", err
	}
	dests, err := s.historyDests(ctx, q)
	if err != nil {
		return nil, "", err
	}
	pos, err := decodeHistoryCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	limit = max(limit, 1)
	f := q.filter()
	// A stream is a destination's history as this call reads it.
	type stream struct {
		name       string
		from, at   string  // its position when the call began, and after what was read
		read       []*Meta // read and not yet listed, newest first
		done       bool    // read to its end
		listed     string  // the position of the last of it listed
		listedSome bool
	}
	var streams []*stream
	for _, d := range dests {
		if pos[d] != historyDone {
			streams = append(streams, &stream{name: d, from: pos[d], at: pos[d]})
		}
	}
	slice := (limit + len(streams) - 1) / max(len(streams), 1)
	calls, budget := 0, 2*len(streams)+historyReads
	// fill reads a slice of every stream that has nothing read and more
	// to read, once each, while the budget lasts; it answers whether it
	// read any.
	fill := func() (bool, error) {
		readAny := false
		for _, st := range streams {
			if len(st.read) > 0 || st.done || calls == budget {
				continue
			}
			page, next, err := s.queue.History(ctx, st.name, f, st.at, slice)
			if err != nil {
				return false, err
			}
			calls++
			readAny = true
			st.read = page
			st.done = next == ""
			if !st.done {
				st.at = next
			}
		}
		return readAny, nil
	}
	var out []*Meta
	for len(out) < limit {
		for {
			readSome, err := fill()
			if err != nil {
				return nil, "", err
			}
			if !readSome {
				break
			}
		}
		// The newest entry read: ties by position, then by the
		// destinations' order.
		var best *stream
		for _, st := range streams {
			if len(st.read) > 0 && (best == nil || compareHistoryIDs(st.read[0].HistoryID, best.read[0].HistoryID) > 0) {
				best = st
			}
		}
		if best == nil {
			break // every stream read to its end, or the budget spent
		}
		// A stream with nothing read and more to come holds entries
		// older than its position only: nothing older than that is
		// listed before them.
		m := best.read[0]
		blocked := false
		for _, st := range streams {
			if len(st.read) == 0 && !st.done && (st.at == "" || compareHistoryIDs(m.HistoryID, st.at) < 0) {
				blocked = true
			}
		}
		if blocked {
			break
		}
		out = append(out, m)
		best.read = best.read[1:]
		best.listed, best.listedSome = m.HistoryID, true
	}
	// Each destination goes on after the last entry of it listed, or
	// where it began when none was; after what was read when all of
	// that was listed.
	next := map[string]string{}
	end := true
	for _, d := range dests {
		next[d] = historyDone
	}
	for _, st := range streams {
		switch {
		case len(st.read) == 0 && st.done:
		case len(st.read) == 0:
			next[st.name] = st.at
		case st.listedSome:
			next[st.name] = st.listed
		default:
			next[st.name] = st.from
		}
		if next[st.name] != historyDone {
			end = false
		}
	}
	if end {
		return out, "", nil
	}
	return out, encodeHistoryCursor(next), nil
}

// historyReads is how many store calls History makes beyond two per
// destination before it answers a page short (each looks at a bounded
// number of entries: 1,000 on both stores).
const historyReads = 16

// Delivery reads dest's envelope id in whatever state it is: queued,
// leased, dead, or delivered (from the history: its payload while it is
// kept, else PayloadExpired). dest may be an orphan the store holds.
func (s *Settled) Delivery(ctx context.Context, dest, id string) (*Envelope, State, error) {
	if dest == "" {
		return nil, "", fmt.Errorf("%w: a delivery is read by destination and ID", ErrBadFilter)
	}
	if _, err := s.historyDests(ctx, HistoryQuery{Destination: dest}); err != nil {
		return nil, "", err
	}
	return s.queue.Get(ctx, dest, id)
}

// historyDone marks a destination whose history a walk has read to its end.
const historyDone = "-"

func encodeHistoryCursor(pos map[string]string) string {
	b, _ := json.Marshal(pos)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeHistoryCursor(c string) (map[string]string, error) {
	pos := map[string]string{}
	if c == "" {
		return pos, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		err = json.Unmarshal(b, &pos)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: the cursor is not one History gave", ErrBadFilter)
	}
	for _, p := range pos {
		if p != historyDone && p != "" && historyTime(p).IsZero() { // "": a destination not begun
			return nil, fmt.Errorf("%w: the cursor is not one History gave", ErrBadFilter)
		}
	}
	return pos, nil
}

// historyTime is the settled time of a position "<ms>-<seq>"; zero when
// it is not one.
func historyTime(p string) time.Time {
	ms, seq, ok := strings.Cut(p, "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	if _, serr := strconv.ParseUint(seq, 10, 64); !ok || err != nil || serr != nil || n <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(n)
}

// compareHistoryIDs orders positions "<ms>-<seq>" as numbers.
func compareHistoryIDs(a, b string) int {
	am, as, _ := strings.Cut(a, "-")
	bm, bs, _ := strings.Cut(b, "-")
	if c := cmp.Compare(len(am), len(bm)); c != 0 {
		return c
	}
	if c := strings.Compare(am, bm); c != 0 {
		return c
	}
	if c := cmp.Compare(len(as), len(bs)); c != 0 {
		return c
	}
	return strings.Compare(as, bs)
}

// historyPage is how many entries a resend reads per History call.
const historyPage = 500

// Resend sends again the settled envelopes q matches, up to limit (1 to
// the maximum), each under its own ID with a new redrive ID: recovery for
// a receiver that lost what it had applied (its dedupe replays what it
// still holds). Delivered ones go while the history keeps their payload;
// dead ones as a redrive moves them. The audit record and the progress
// are a redrive's (Progress), with Kind "resend".
//
// It reads what it may send, not the whole match: Matched counts up to
// limit, and More says that others match beyond it. A dry run moves
// nothing and counts up to the maximum (max_redrive), the most one resend
// may send.
func (s *Settled) Resend(ctx context.Context, q HistoryQuery, limit int, by string, dryRun bool) (*Redrive, error) {
	if limit <= 0 || limit > s.maxRedrive {
		return nil, fmt.Errorf("%w: %d; want 1 to %d (max_redrive)", ErrBadLimit, limit, s.maxRedrive)
	}
	if err := q.check(); err != nil {
		return nil, err
	}
	if q.Destination != "" && !slices.Contains(s.dests(), q.Destination) {
		if _, err := s.historyDests(ctx, q); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %s is not configured: move or purge its envelopes first", ErrOrphaned, q.Destination)
	}
	r := &Redrive{Kind: "resend", Resend: &q, Filter: Filter{Destination: q.Destination, Tenant: q.Tenant}, Limit: limit, By: by, At: s.now()}
	bound := limit
	if dryRun {
		bound = s.maxRedrive
	}
	var picked []Letter
walk:
	for cursor := ""; ; {
		page, next, err := s.History(ctx, q, cursor, min(historyPage, bound-r.Matched+1))
		if err != nil {
			return nil, err
		}
		for _, m := range page {
			if m.Broken {
				continue
			}
			if r.Matched == bound {
				r.More = true
				break walk
			}
			r.Matched++
			if len(picked) < limit {
				picked = append(picked, Letter{Destination: m.Destination, ID: m.ID})
			}
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if dryRun || len(picked) == 0 {
		return r, nil
	}
	if err := s.move(ctx, r, s.dests(), picked, "resend", s.queue.Resend); err != nil {
		if r.ID == "" {
			return nil, err // nothing moved: the record was refused
		}
		return r, err
	}
	return r, nil
}
