package sender

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
)

// Ops is the one service behind the doors to the sender's state: the
// admin API (package httpapi, which the `hookgate dlq` and `destinations`
// commands speak to) and the operator console. Every state change goes
// through it, so each is logged, counted and followed by the same wake-up
// whichever door it came in by.
type Ops struct {
	sender  *Sender
	settled *Settled
	logger  *slog.Logger
	opts    OpsOptions
}

// OpsOptions are an Ops's dependencies beyond the sender; the zero value
// logs nothing and counts nothing.
type OpsOptions struct {
	Logger *slog.Logger
	// Redriven is told of the letters each redrive moved (metrics).
	Redriven func(ctx context.Context, letters []Letter)
}

// NewOps returns the service over s and its settled envelopes (dead letters and history).
func NewOps(s *Sender, settled *Settled, opts OpsOptions) *Ops {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Ops{sender: s, settled: settled, logger: logger, opts: opts}
}

// Configured reports whether name is a configured destination.
func (o *Ops) Configured(name string) bool {
	_, ok := o.sender.dest(name)
	return ok
}

// Destinations lists every destination's health, in configuration order,
// then the orphans: destinations the store holds envelopes of that the
// configuration no longer names.
func (o *Ops) Destinations(ctx context.Context) ([]DestinationStatus, error) {
	out := []DestinationStatus{}
	for _, name := range o.sender.Destinations() {
		v, err := o.sender.Status(ctx, name)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	orphans, err := o.sender.Orphans(ctx)
	if err != nil {
		return nil, err
	}
	return append(out, orphans...), nil
}

// MoveOrphan moves an orphan's envelopes to a configured destination; by
// names who asked.
func (o *Ops) MoveOrphan(ctx context.Context, from, to, by string) (moved, kept int, err error) {
	moved, kept, err = o.sender.MoveOrphan(ctx, from, to)
	if moved > 0 || kept > 0 || err == nil {
		o.logger.Info("orphaned destination moved", withError([]any{"from", from, "to", to,
			"moved", moved, "kept", kept, "by", by}, err)...)
	}
	return moved, kept, err
}

// PurgeOrphan deletes everything the store holds of an orphan.
func (o *Ops) PurgeOrphan(ctx context.Context, name, by string) (int, error) {
	n, err := o.sender.PurgeOrphan(ctx, name)
	if err == nil {
		o.logger.Warn("orphaned destination purged", "destination", name, "removed", n, "by", by)
	}
	return n, err
}

// Held counts the envelopes the store holds of name, configured or not,
// by state: queued (paused ones included), leased, dead and corrupt;
// those that are not 0.
func (o *Ops) Held(ctx context.Context, name string) (map[string]int, error) {
	st, err := o.sender.queue.Stats(ctx, name, o.sender.now())
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for k, n := range map[string]int{"queued": st.Queued, "leased": st.Leased, "dead": st.Dead, "corrupt": st.Corrupt} {
		if n > 0 {
			out[k] = n
		}
	}
	return out, nil
}

// Destination reads one destination's health.
func (o *Ops) Destination(ctx context.Context, name string) (DestinationStatus, error) {
	return o.sender.Status(ctx, name)
}

// SetPaused pauses or resumes a destination; by names who asked. A
// subscriber's pause (by starts with SubscriberPause) is kept under the
// subscriber's name alone, and a subscriber resumes only its own, or a
// disablement (IsDisabled: its endpoint fixed, its owner enables it);
// anyone else's resume is of any pause. A resume of a disabled
// destination enables it: its failing run starts afresh, and
// destination.enabled is told.
func (o *Ops) SetPaused(ctx context.Context, name string, paused bool, by string) (DestinationStatus, error) {
	if !o.Configured(name) {
		return DestinationStatus{}, ErrUnknownDestination
	}
	subscriber := strings.HasPrefix(by, SubscriberPause(""))
	var was string // who made the pause a resume ends, or that a subscriber's pause finds
	if !paused || subscriber {
		var err error
		if _, was, err = o.sender.queue.Paused(ctx, name); err != nil {
			return DestinationStatus{}, err
		}
	}
	if paused && subscriber && was != "" {
		// Paused already: a subscriber's pause would make another's its
		// own, to resume.
		return o.sender.Status(ctx, name)
	}
	stored := by
	switch {
	case subscriber && !paused && IsDisabled(was):
		stored = was // this disablement, not one made since
	case subscriber:
		stored, _, _ = strings.Cut(by, " ") // the subscriber alone
	case !paused:
		stored = "" // any pause
	}
	// The sender holds its own workers at once, writes the store, and
	// wakes the workers on a resume.
	if err := o.sender.SetPaused(ctx, name, paused, stored); err != nil {
		return DestinationStatus{}, err
	}
	action := "destination resumed"
	switch {
	case paused:
		action = "destination paused"
	case IsDisabled(was):
		action = "destination enabled"
		now := o.sender.now()
		o.sender.restartRun(name, now)
		door, _, _ := strings.Cut(by, " from ") // who, not where from: it leaves for a receiver
		o.sender.tell(ctx, EventDestinationEnabled, name, opID("enabled", name, now), OperationalData{By: door})
	}
	o.logger.Info(action, "destination", name, "by", by)
	return o.sender.Status(ctx, name)
}

// Enable resumes a destination disabled by DisableAfter or a 410 (any
// pause, as a resume is), its failing run started afresh; by names who
// asked.
func (o *Ops) Enable(ctx context.Context, name, by string) (DestinationStatus, error) {
	return o.SetPaused(ctx, name, false, by)
}

// Enqueue queues e for delivery, idempotent by e.ID within its
// destination. An ID that is not 1 to 1024 bytes of visible ASCII is
// refused with an error that wraps ErrBadID; another error leaves the
// outcome unknown (the store may have applied it).
func (o *Ops) Enqueue(ctx context.Context, e *Envelope) (EnqueueResult, error) {
	return o.sender.Enqueue(ctx, e)
}

// Publish fans ev out to every destination subscribed to its type (see
// Sender.Publish): idempotent by ev.ID, and publishing it again completes
// what a failure cut short. An error that wraps ErrBadID or
// ErrMissingEventType refuses the event; another leaves the outcome
// unknown (some destinations may hold it): publish again.
func (o *Ops) Publish(ctx context.Context, ev *Event) (PublishResult, error) {
	return o.sender.Publish(ctx, ev)
}

// Summary groups the dead letters f matches by destination and class, at
// most upTo of them when upTo is above 0.
func (o *Ops) Summary(ctx context.Context, f Filter, upTo int) ([]Group, int, bool, error) {
	return o.settled.Summary(ctx, f, upTo)
}

// Count counts the dead letters f matches, up to upTo.
func (o *Ops) Count(ctx context.Context, f Filter, upTo int) (int, bool, error) {
	return o.settled.Count(ctx, f, upTo)
}

// List pages through the dead letters f matches.
func (o *Ops) List(ctx context.Context, f Filter, limit int, cursor string) ([]*Meta, string, error) {
	return o.settled.List(ctx, f, limit, cursor)
}

// Get reads one envelope of dest ("" for any destination).
func (o *Ops) Get(ctx context.Context, dest, id string) (*Envelope, State, error) {
	return o.settled.Get(ctx, dest, id)
}

// HeaderSent is the header e's next attempt carries, secrets redacted.
func (o *Ops) HeaderSent(e *Envelope) (http.Header, error) {
	return o.sender.HeaderSent(e)
}

// Redrive moves up to limit of the dead letters f matches back to the
// queue under a new redrive ID (a dry run only counts), then wakes the
// workers.
func (o *Ops) Redrive(ctx context.Context, f Filter, limit int, by string, dryRun bool) (*Redrive, error) {
	rd, err := o.settled.Redrive(ctx, f, limit, by, dryRun)
	if rd != nil && rd.Moved > 0 {
		if o.opts.Redriven != nil {
			o.opts.Redriven(ctx, rd.Letters)
		}
		o.logger.Info("redrive", withError([]any{"redrive_id", rd.ID, "matched", rd.Matched,
			"moved", rd.Moved, "by", by}, err)...)
		for _, d := range o.sender.Destinations() {
			o.sender.Wake(d)
		}
	}
	return rd, err
}

// History pages through the settled envelopes q matches, newest first
// across destinations (see Settled.History); with State StateQueued, it
// lists the first of those not yet settled, in flight first, then by
// when due. It reads no payload.
func (o *Ops) History(ctx context.Context, q HistoryQuery, cursor string, limit int) ([]*Meta, string, error) {
	return o.settled.History(ctx, q, cursor, limit)
}

// Delivery reads dest's envelope id in any state (see Settled.Delivery).
func (o *Ops) Delivery(ctx context.Context, dest, id string) (*Envelope, State, error) {
	return o.settled.Delivery(ctx, dest, id)
}

// Resend sends again up to limit of the settled envelopes q matches, under
// a new redrive ID (a dry run only counts), then wakes the workers; its
// audit record and progress are a redrive's (Progress).
func (o *Ops) Resend(ctx context.Context, q HistoryQuery, limit int, by string, dryRun bool) (*Redrive, error) {
	rd, err := o.settled.Resend(ctx, q, limit, by, dryRun)
	if rd != nil && rd.Moved > 0 {
		if o.opts.Redriven != nil {
			o.opts.Redriven(ctx, rd.Letters)
		}
		o.logger.Info("resend", withError([]any{"redrive_id", rd.ID, "matched", rd.Matched, "more", rd.More,
			"moved", rd.Moved, "by", by}, err)...)
		for _, d := range o.sender.Destinations() {
			o.sender.Wake(d)
		}
	}
	return rd, err
}

// Progress reads a redrive's audit record and what became of its letters;
// with a scope, only a redrive confined to it.
func (o *Ops) Progress(ctx context.Context, id string, scope Scope) (*Redrive, error) {
	return o.settled.Progress(ctx, id, scope)
}

// Purge deletes the dead letters f matches, bounded by opts (see
// Settled.Purge; a dry run only counts); by names who asked.
func (o *Ops) Purge(ctx context.Context, f Filter, opts PurgeOptions, by string) (PurgeResult, error) {
	r, err := o.settled.Purge(ctx, f, opts)
	if r.Removed > 0 {
		o.logger.Info("dead letters purged", withError([]any{"matched", r.Matched, "removed", r.Removed,
			"limit", opts.Limit, "ids", f.IDs, "by", by}, err)...)
	}
	return r, err
}

// withError appends err to a log line's attributes when there is one.
func withError(args []any, err error) []any {
	if err != nil {
		args = append(args, "error", err)
	}
	return args
}
