package sender

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Queue keeps each destination's envelopes: due (queued, or waiting for a
// retry), leased, and dead; the IDs delivered within the retention (so an
// enqueue is idempotent); whether the destination is paused; and each
// redrive's counts. Every method is atomic per envelope: one Lua script in
// Redis, one transaction in bbolt. Leases are judged by the store's clock
// (Redis TIME; on bbolt, the one process's clock that now comes from);
// the other times come from the caller's clock.
type Queue interface {
	// Enqueue adds e, due at e.NextAt, unless its ID is already known to
	// its destination (queued, leased, dead, or delivered within the
	// retention): then nothing is written, and the answer says the
	// state, and whether the payload differed.
	Enqueue(ctx context.Context, e *Envelope) (EnqueueResult, error)

	// Lease moves leases that expired back to due, then leases up to n
	// envelopes due by now, oldest first, for lease. A paused destination
	// leases nothing. An envelope that does not decode is set aside
	// (Stats.Corrupt), never leased; the others are returned even when
	// setting it aside fails (with the error).
	Lease(ctx context.Context, dest string, n int, now time.Time, lease time.Duration) ([]Leased, error)

	// Due answers which of dests Lease would lease something of now: an
	// envelope due by now, or a lease expired; a paused destination has
	// none. It writes nothing: the sender asks it of its idle
	// destinations, all at once, instead of each polling Lease. A
	// failure for some answers the others beside the error.
	Due(ctx context.Context, dests []string, now time.Time) ([]string, error)

	// Settle applies a batch of outcomes. An outcome whose lease is no
	// longer held (it expired and the envelope was leased again) is
	// skipped and counted in the answer. An envelope delivered or dead
	// under a redrive counts in that redrive's RedriveCounts.
	Settle(ctx context.Context, dest string, outcomes []Outcome, now time.Time) (skipped int, err error)

	// SetPaused pauses or resumes a destination; the state is kept. A
	// pause records by, who made it (PausedByGone for a 410, a
	// SubscriberPause, else the door an operator used). A resume with an
	// empty by resumes any pause; with a by, only a pause that by made
	// (ErrPausedByOther otherwise, and nothing changes).
	SetPaused(ctx context.Context, dest string, paused bool, by string) error

	// Paused reads whether dest is paused, and by whom: one small read,
	// for the workers' check before each attempt.
	Paused(ctx context.Context, dest string) (paused bool, by string, err error)

	// Stats reads a destination's depth and oldest ready age, from
	// counters and index heads: it walks nothing.
	Stats(ctx context.Context, dest string, now time.Time) (Stats, error)

	// Dead lists the records of dest's dead letters in dead-at order,
	// from after the cursor (empty: the first), at most limit; next is ""
	// at the end. It reads no payload. A record that does not decode is
	// listed as a BrokenMeta, never an error.
	Dead(ctx context.Context, dest string, cursor string, limit int) (letters []*Meta, next string, err error)

	// Metas reads the records of ids, with their states, in the order
	// given: a record that does not decode as a BrokenMeta, an ID
	// delivered within the history as its record with StateDelivered and
	// SettledAt (one that earlier versions delivered: its ID, Fingerprint
	// and SettledAt alone); an ID it holds nothing of is left out. It
	// reads no payload.
	Metas(ctx context.Context, dest string, ids []string) ([]*Meta, error)

	// MetasAcross is Metas of one ID in each of dests, read at once (one
	// transaction, one pipeline): a fan-out's reading of what its
	// subscribers hold. Its answer is aligned with dests, nil where one
	// holds nothing of id.
	MetasAcross(ctx context.Context, dests []string, id string) ([]*Meta, error)

	// Get reads an envelope in any state, with its state: a delivered one
	// from the history, with its attempt log, and its payload while the
	// history keeps it (PayloadExpired after). ErrNotFound when there is
	// none.
	Get(ctx context.Context, dest, id string) (*Envelope, State, error)

	// History lists dest's settled envelopes newest first, by when they
	// settled: the delivered ones, and the dead ones as they died. An
	// envelope that settled more than once (redriven, resent) is listed
	// as it settled last. The records carry State (delivered or dead),
	// SettledAt, Tried and LastStatus. It lists those f matches, after
	// cursor ("": from the newest), at most limit; next is "" at the end.
	// A walk is stable: what settles meanwhile settles after the walk
	// began, so no older entry is skipped or listed twice. It looks at a
	// bounded number of entries per call, so a page may hold fewer than
	// limit with more to come. Each record's HistoryID is its entry's
	// position, "<settled ms>-<sequence>", and a cursor is such a
	// position. It reads no payload.
	// A filter that names IDs (ID, IDs) is a lookup of each, never a
	// walk: its cost is the IDs', however long the history.
	History(ctx context.Context, dest string, f HistoryFilter, cursor string, limit int) (entries []*Meta, next string, err error)

	// Pending lists dest's envelopes not yet settled that f matches, at
	// most limit: the leased ones by when their lease ends, then the due
	// ones by when due (due now, then the retries scheduled later). The
	// records carry State (StateLeased, or StateQueued, paused or not)
	// and NextAt (a leased one's: when its lease ends). A record that
	// does not decode is listed as a BrokenMeta, when f is zero. It reads
	// no payload and takes no cursor; it reads on until limit match, or
	// it has looked at MaxPendingScan envelopes: a filter that few match
	// lists those among the first MaxPendingScan. Envelopes that wait
	// behind their entity's head (Ordering) come last, entity by entity.
	Pending(ctx context.Context, dest string, f PendingFilter, limit int) ([]*Meta, error)

	// TrimHistory forgets what dest's history keeps past its time at now:
	// entries settled more than History.Keep ago, and payloads past
	// History.Payload; and the dead letters past the retention, which
	// releases the entities they held (Ordering.Hold); a bounded number of
	// each. Settle trims as much, but a destination where nothing settles
	// is trimmed by this alone. It writes nothing when nothing is due, and
	// answers when the next is (now or before: more are due already; zero:
	// nothing held will be).
	TrimHistory(ctx context.Context, dest string, now time.Time) (next time.Time, err error)

	// Resend moves settled envelopes back to due at now under redriveID,
	// their attempt budget renewed and their log kept: a delivered one
	// while the history keeps its payload, a dead one as Redrive moves it.
	// IDs queued or leased, unknown, or whose payload expired are skipped;
	// it answers the IDs it moved. What becomes of them counts in
	// RedriveCounts(redriveID).
	Resend(ctx context.Context, dest string, ids []string, redriveID string, now time.Time) ([]string, error)

	// Redrive moves dead letters back to due at now, with a redrive ID,
	// their attempt budget renewed and their log kept. IDs that are not
	// dead are skipped; it answers the IDs it moved. Each letter moves at
	// most once, however many redrives run at once; a letter that an
	// earlier redrive had moved counts as superseded in that one's
	// RedriveCounts.
	Redrive(ctx context.Context, dest string, ids []string, redriveID string, now time.Time) ([]string, error)

	// RedriveCounts reads what became of the letters a redrive moved in
	// dest.
	RedriveCounts(ctx context.Context, dest, redriveID string) (RedriveCounts, error)

	// Purge deletes dead letters; it answers how many went.
	Purge(ctx context.Context, dest string, ids []string) (int, error)

	// Destinations lists every destination the store holds anything of
	// (envelopes in any state, delivered IDs, a pause), configured or
	// not, in byte order. It scans nothing.
	Destinations(ctx context.Context) ([]string, error)

	// Move moves every queued, leased and dead envelope of from to to:
	// IDs, records, attempt logs and redrive IDs kept, queued ones due at
	// now; then the IDs delivered within the retention, so that an enqueue
	// under the new name stays idempotent, and from's redrive counts. An
	// ID that to already holds (queued, leased, dead or delivered) with
	// the same payload counts as moved (a move that was cut short, done
	// again); with another payload it stays in from and counts as kept,
	// as do an envelope whose lease is live (its holder settles it) and
	// one whose record does not decode.
	Move(ctx context.Context, from, to string, now time.Time) (moved, kept int, err error)

	// Drop deletes everything the store holds of dest: its envelopes in
	// every state, delivered IDs, pause, counts and first-seen time. It
	// answers how many envelopes went.
	Drop(ctx context.Context, dest string) (int, error)

	// FirstSeen records now as the time each of dests was first seen,
	// unless one is recorded already, and answers the recorded times. A
	// fan-out completes an event only for the destinations seen before
	// it: one added later does not receive earlier events.
	FirstSeen(ctx context.Context, dests []string, now time.Time) (map[string]time.Time, error)

	// Order sets how dest's envelopes are ordered from now on (the zero
	// Ordering, unordered, until it is called). It is this process's
	// setting, kept in memory and written nowhere: every instance is
	// given its destinations' configuration.
	Order(dest string, o Ordering)
}

// Ordering is a destination's ordered delivery (ordering entity).
//
// Under ByEntity, an envelope enqueued with an Entity joins the back of
// its entity: the envelopes of one (destination, entity) are leased one
// at a time, in enqueue order. Only the entity's head (its oldest
// unsettled envelope) is due, leased, retried or released; the others
// wait (Stats.Waiting, state queued, or paused), and none of them is
// leased while the head is unsettled. A lease that expires gives the same
// head again, never the next. When the head is delivered, the next
// becomes the head, due at its own NextAt (or at once, if that passed).
// When it dies, the next becomes the head too, unless Hold: then the
// entity is held (Stats.Held) until the dead head is redriven or resent
// (it is due at once, and goes first), purged, trimmed at the retention,
// or moved away. A head set aside because it does not decode
// (Stats.Corrupt) lets the next go.
//
// A redrive or resend of an envelope that is not its entity's head joins
// the back of its entity when the setting at that time is ByEntity, and
// is due at once otherwise. Envelopes without an entity are not ordered.
// An envelope that waits keeps waiting, and is released by its head's
// settling, whatever the setting becomes: turning ordering off lets the
// waiting ones drain one at a time, and orders no new one.
//
// Pending lists the waiting envelopes after the due ones, each with
// Meta.Behind (its entity's head) and Meta.Held. Move carries them with
// the rest, each entity's head first, in their order, and they join their
// entity in to when to is ordered (else they are due at once); an entity
// whose head's lease is live stays whole in from, counted kept, for a
// later Move. Drop deletes them.
type Ordering struct {
	ByEntity bool
	// Hold keeps an entity waiting behind its dead head (on_dead hold);
	// else a dead head lets the next go (on_dead skip).
	Hold bool
}

// HistoryFilter selects settled envelopes; a zero field matches all.
type HistoryFilter struct {
	ID, EventType, Entity string
	// IDs selects any of these (with ID too, ID if it is one of them):
	// a set of IDs looked up, not a walk.
	IDs []string
	// State is StateDelivered or StateDead.
	State State
	// Since and Until bound SettledAt: since <= settled < until.
	Since, Until time.Time
}

// Match reports whether f selects m, IDs aside (a lookup found m by one
// of them).
func (f HistoryFilter) Match(m *Meta) bool {
	return (f.ID == "" || m.ID == f.ID) && (f.EventType == "" || m.EventType == f.EventType) &&
		(f.Entity == "" || m.Entity == f.Entity) && (f.State == "" || m.State == f.State) &&
		(f.Since.IsZero() || !m.SettledAt.Before(f.Since)) && (f.Until.IsZero() || m.SettledAt.Before(f.Until))
}

// History is how long a queue keeps what settled. Entries are kept for
// Keep after they settle (the enqueue's idempotency shares them: an ID
// delivered within Keep is a duplicate); a delivered payload for Payload
// after delivery (0: not kept), at most Keep.
type History struct {
	Keep, Payload time.Duration
	// Now is the clock that judges a kept payload's time where a call
	// brings none (Get); nil is time.Now.
	Now func() time.Time
}

// Lookup is the IDs f selects (ID, IDs), each once, in byte order: nil
// when it names none, empty when ID is not among IDs.
func (f HistoryFilter) Lookup() []string {
	switch {
	case len(f.IDs) == 0 && f.ID == "":
		return nil
	case len(f.IDs) == 0:
		return []string{f.ID}
	case f.ID != "" && !slices.Contains(f.IDs, f.ID):
		return []string{}
	case f.ID != "":
		return []string{f.ID}
	}
	return slices.Compact(slices.Sorted(slices.Values(f.IDs)))
}

// LookupPage is History's answer for a lookup (f.Lookup()) that found
// entries: those f matches and the cursor lets through (positions below
// it), newest first, at most limit; next is the last one's position when
// more remain.
func LookupPage(found []*Meta, f HistoryFilter, cursor string, limit int) (page []*Meta, next string) {
	slices.SortFunc(found, func(a, b *Meta) int { return compareHistoryIDs(b.HistoryID, a.HistoryID) })
	for _, m := range found {
		if !f.Match(m) || (cursor != "" && compareHistoryIDs(m.HistoryID, cursor) >= 0) {
			continue
		}
		if len(page) == limit {
			return page, page[len(page)-1].HistoryID
		}
		page = append(page, m)
	}
	return page, ""
}

// DefaultHistoryPayload is how long a delivered payload is kept when the
// configuration does not say.
const DefaultHistoryPayload = 24 * time.Hour

// NewHistory is the history a sender's configuration asks for: keep
// (0: the retention) and payload (nil: DefaultHistoryPayload, at most
// keep; 0: no payload is kept). An explicit payload above keep, or a
// negative duration, is an error.
func NewHistory(retention, keep time.Duration, payload *time.Duration) (History, error) {
	h := History{Keep: cmp.Or(keep, retention, DefaultRetention), Payload: min(DefaultHistoryPayload, cmp.Or(keep, retention, DefaultRetention))}
	switch {
	case keep < 0:
		return h, fmt.Errorf("history: %s is negative", keep)
	case payload == nil:
		return h, nil
	case *payload < 0:
		return h, fmt.Errorf("history_payload: %s is negative", *payload)
	case *payload > h.Keep:
		return h, fmt.Errorf("history_payload: %s is longer than the history, %s: a payload is kept at most as long as its entry", *payload, h.Keep)
	}
	h.Payload = *payload
	return h, nil
}

// RedriveCounts is what became of the letters one redrive moved in one
// destination; the rest are pending.
type RedriveCounts struct {
	Moved, Delivered, DeadAgain, Superseded int
}

// State is an envelope's state in the queue.
type State string

// The states.
const (
	StateQueued    State = "queued"
	StateLeased    State = "leased"
	StateDelivered State = "delivered"
	StateDead      State = "dead"
	StatePaused    State = "paused" // queued, and the destination is paused
)

// EnqueueResult is Enqueue's answer.
type EnqueueResult struct {
	State State
	// Duplicate is set when the ID was already known: nothing was written.
	Duplicate bool
	// Mismatch is set for a duplicate whose payload differs.
	Mismatch bool
}

// Leased is a leased envelope and the lease it holds.
type Leased struct {
	*Envelope
	LeaseUntil time.Time // the fencing token of Settle
}

// OutcomeKind says what became of a leased envelope.
type OutcomeKind int

// The outcomes.
const (
	Delivered OutcomeKind = iota + 1 // into the history, with its last attempt
	Retry                            // due again at Envelope.NextAt
	Dead                             // dead-lettered at Envelope.DeadAt
	Release                          // back to due unchanged (shutdown, breaker)
)

// Outcome is the settlement of one lease.
type Outcome struct {
	Kind       OutcomeKind
	ID         string
	LeaseUntil time.Time
	// Envelope is the updated envelope, its attempt log with the attempt
	// just made (Delivered, Retry, Dead).
	Envelope *Envelope
}

// Stats is a destination's depth by state.
type Stats struct {
	Queued, Leased, Dead int
	Paused               bool
	// PausedBy names who paused it (SetPaused's by).
	PausedBy string
	// OldestReady is the age of the oldest envelope due by now; zero when
	// none is.
	OldestReady time.Duration
	// OldestDead is when the oldest dead letter died; zero when none.
	OldestDead time.Time
	// History counts the entries the history holds (each settled ID
	// once, as History lists it), read from a counter: approximate while
	// settles and trims run.
	History int
	// Waiting counts the queued envelopes that wait behind their
	// entity's head (Ordering): Queued counts them too.
	Waiting int
	// Held counts the entities whose head is a dead letter that holds
	// them (Ordering.Hold).
	Held int
	// Corrupt counts the envelopes set aside because they did not decode
	// (a damaged entry, or one written by a newer version): they would
	// otherwise fail every lease of their destination.
	Corrupt int
}

// PausedByGone is the pause a 410 Gone answer makes.
const PausedByGone = "gone"

// SubscriberPause is who a pause made by a subscriber (a console scoped
// to its destination) is by: that subscriber alone may resume it.
func SubscriberPause(scope string) string { return "subscriber:" + scope }

// ErrPausedByOther means a resume of a pause that another made.
var ErrPausedByOther = errors.New("paused by another")

// ErrNotFound means the queue holds no such envelope.
var ErrNotFound = errors.New("no such envelope")
