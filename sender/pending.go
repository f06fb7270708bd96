package sender

// The envelopes not yet settled, as the delivery history's search lists
// them with state "queued": what waits for a destination that is down.

import (
	"context"
	"fmt"
)

// MaxPendingScan bounds the envelopes one Pending looks at, filtered or
// not: a listing never walks a deep queue (on the embedded store, a long
// read would hold back the writes that grow the file, enqueues among
// them).
const MaxPendingScan = 10_000

// PendingFilter selects unsettled envelopes by their record; a zero
// field matches all.
type PendingFilter struct {
	EventType, Entity string
}

// Match reports whether f selects m.
func (f PendingFilter) Match(m *Meta) bool {
	return (f.EventType == "" || m.EventType == f.EventType) && (f.Entity == "" || m.Entity == f.Entity)
}

// pendingRank orders the unsettled states: in flight first, then due,
// then those that wait behind their entity's head.
func pendingRank(m *Meta) int {
	switch {
	case m.State == StateLeased:
		return 0
	case m.Behind != "":
		return 2
	}
	return 1
}

// pendingBefore reports whether a comes before b in Pending's order.
func pendingBefore(a, b *Meta) bool {
	if ra, rb := pendingRank(a), pendingRank(b); ra != rb {
		return ra < rb
	}
	return a.NextAt.Before(b.NextAt)
}

// pending lists the envelopes not yet settled that q matches (State
// StateQueued), at most limit: the leased ones (in flight) first, then
// the queued ones by when due, merged across q's destinations. A queued
// envelope of a paused destination is listed as queued. There is no
// cursor: the answer is the first limit, and the destinations' depth
// (Ops.Destinations) counts them all. Since and until bound when an
// envelope settled, and an unsettled one has not: they are refused.
func (s *Settled) pending(ctx context.Context, q HistoryQuery, cursor string, limit int) ([]*Meta, string, error) {
	switch {
	case !q.Since.IsZero() || !q.Until.IsZero():
		return nil, "", fmt.Errorf("%w: since and until bound when an envelope settled, and a queued one has not: "+
			"list queued envelopes without them", ErrBadFilter)
	case cursor != "":
		return nil, "", fmt.Errorf("%w: a list of queued envelopes has no next page: it lists the first ones due, "+
			"and the destinations' depth counts them all", ErrBadFilter)
	case len(q.IDs) > 0:
		return nil, "", fmt.Errorf("%w: queued envelopes are looked up by one ID", ErrBadFilter)
	}
	dests, err := s.historyDests(ctx, q)
	if err != nil {
		return nil, "", err
	}
	limit = max(limit, 1)
	f := PendingFilter{EventType: q.EventType, Entity: q.Entity}
	streams := make([][]*Meta, 0, len(dests))
	for _, d := range dests {
		var page []*Meta
		if q.ID != "" {
			page, err = s.pendingID(ctx, d, q.ID, f)
		} else {
			page, err = s.queue.Pending(ctx, d, f, limit)
		}
		if err != nil {
			return nil, "", err
		}
		streams = append(streams, page)
	}
	// Each destination's list is in order: merge them, ties by the
	// destinations' order.
	var out []*Meta
	for len(out) < limit {
		best := -1
		for i, st := range streams {
			if len(st) > 0 && (best < 0 || pendingBefore(st[0], streams[best][0])) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		out = append(out, streams[best][0])
		streams[best] = streams[best][1:]
	}
	return out, "", nil
}

// pendingID looks id up in dest: its record when it is queued or leased
// and f matches it. A lookup, not a walk: its cost is one ID's.
func (s *Settled) pendingID(ctx context.Context, dest, id string, f PendingFilter) ([]*Meta, error) {
	found, err := s.queue.Metas(ctx, dest, []string{id})
	if err != nil {
		return nil, err
	}
	var out []*Meta
	for _, m := range found {
		switch m.State {
		case StatePaused:
			m.State = StateQueued
		case StateQueued, StateLeased:
		default:
			continue
		}
		if f.Match(m) {
			out = append(out, m)
		}
	}
	return out, nil
}
