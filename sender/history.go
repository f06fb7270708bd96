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
	Destination string    `json:"destination,omitempty"`
	EventType   string    `json:"event_type,omitempty"`
	Entity      string    `json:"entity,omitempty"`
	ID          string    `json:"id,omitempty"`
	IDs         []string  `json:"ids,omitempty"` // any of these (a resend's list)
	State       State     `json:"state,omitempty"`
	Since       time.Time `json:"since,omitzero"` // settled at or after
	Until       time.Time `json:"until,omitzero"` // settled before
}

func (q HistoryQuery) filter() HistoryFilter {
	return HistoryFilter{ID: q.ID, EventType: q.EventType, Entity: q.Entity, State: q.State, Since: q.Since, Until: q.Until}
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
func (s *DLQ) historyDests(ctx context.Context, q HistoryQuery) ([]string, error) {
	if q.Destination == "" {
		return s.dests, nil
	}
	if slices.Contains(s.dests, q.Destination) {
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
// next is "" at the end. A page may hold fewer than limit with more to
// come (the store looks at a bounded number of entries per call). Paging
// is stable while envelopes settle. It reads no payload.
func (s *DLQ) History(ctx context.Context, q HistoryQuery, cursor string, limit int) ([]*Meta, string, error) {
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
	f := q.filter()
	var all []*Meta
	next := map[string]string{} // each destination's position after its page
	var floor time.Time         // no entry older than a page that stopped short is listed yet
	for _, d := range dests {
		if pos[d] == historyDone {
			next[d] = historyDone
			continue
		}
		page, after, err := s.queue.History(ctx, d, f, pos[d], limit)
		if err != nil {
			return nil, "", err
		}
		for _, m := range page {
			if len(q.IDs) == 0 || slices.Contains(q.IDs, m.ID) {
				all = append(all, m)
			}
		}
		next[d] = cmp.Or(after, historyDone)
		if after != "" && len(page) < limit {
			if t := historyTime(after); t.After(floor) {
				floor = t
			}
		}
	}
	// Newest first; a tie by position, then by the destinations' order.
	slices.SortStableFunc(all, func(a, b *Meta) int {
		if c := b.SettledAt.Compare(a.SettledAt); c != 0 {
			return c
		}
		return compareHistoryIDs(b.HistoryID, a.HistoryID)
	})
	var out []*Meta
	for _, m := range all {
		if len(out) == limit || m.SettledAt.Before(floor) {
			break
		}
		out = append(out, m)
	}
	// Each destination resumes after the last entry of its listed, or
	// where its page ended when every entry of it was listed.
	taken := map[string]int{}
	last := map[string]string{}
	for _, m := range out {
		taken[m.Destination]++
		last[m.Destination] = m.HistoryID
	}
	for _, m := range all {
		taken[m.Destination]--
	}
	end := true
	for _, d := range dests {
		switch {
		case pos[d] == historyDone:
		case taken[d] < 0: // some of its page was not listed
			if l, ok := last[d]; ok {
				next[d] = l
			} else {
				next[d] = pos[d]
			}
		}
		if next[d] != historyDone {
			end = false
		}
	}
	if end {
		return out, "", nil
	}
	return out, encodeHistoryCursor(next), nil
}

// Delivery reads dest's envelope id in whatever state it is: queued,
// leased, dead, or delivered (from the history: its payload while it is
// kept, else PayloadExpired). dest may be an orphan the store holds.
func (s *DLQ) Delivery(ctx context.Context, dest, id string) (*Envelope, State, error) {
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
// dead ones as a redrive moves them. A dry run counts what matches and
// moves nothing. The audit record and the progress are a redrive's
// (Progress), with Kind "resend".
func (s *DLQ) Resend(ctx context.Context, q HistoryQuery, limit int, by string, dryRun bool) (*Redrive, error) {
	if limit <= 0 || limit > s.maxRedrive {
		return nil, fmt.Errorf("%w: %d; want 1 to %d (max_redrive)", ErrBadLimit, limit, s.maxRedrive)
	}
	if err := q.check(); err != nil {
		return nil, err
	}
	if q.Destination != "" && !slices.Contains(s.dests, q.Destination) {
		if _, err := s.historyDests(ctx, q); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %s is not configured: move or purge its envelopes first", ErrOrphaned, q.Destination)
	}
	r := &Redrive{Kind: "resend", Resend: &q, Filter: Filter{Destination: q.Destination}, Limit: limit, By: by, At: s.now()}
	var picked []Letter
	for cursor := ""; ; {
		page, next, err := s.History(ctx, q, cursor, historyPage)
		if err != nil {
			return nil, err
		}
		for _, m := range page {
			if m.Broken {
				continue
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
	if err := s.move(ctx, r, s.dests, picked, "resend", s.queue.Resend); err != nil {
		if r.ID == "" {
			return nil, err // nothing moved: the record was refused
		}
		return r, err
	}
	return r, nil
}
