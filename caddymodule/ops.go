package caddymodule

import (
	"context"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/hookgate/hookgate/sender"
)

// ops is the one service behind the three doors to the sender's state:
// the admin API (and the `hookgate dlq` and `destinations` commands, which
// speak to it) and the webhook_console page. Every state change goes
// through it, so each is logged, counted and followed by the same wake-up
// whichever door it came in by.
type ops struct {
	app    *App
	logger *zap.Logger
}

func (a *App) ops() ops { return ops{app: a, logger: a.logger} }

// Destinations lists every destination's health, in configuration order,
// then the orphans: destinations the store holds envelopes of that the
// configuration no longer names.
func (o ops) Destinations(ctx context.Context) ([]sender.DestinationStatus, error) {
	out := []sender.DestinationStatus{}
	for _, name := range o.app.sender.Destinations() {
		v, err := o.app.sender.Status(ctx, name)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	orphans, err := o.app.sender.Orphans(ctx)
	if err != nil {
		return nil, err
	}
	return append(out, orphans...), nil
}

// MoveOrphan moves an orphan's envelopes to a configured destination.
func (o ops) MoveOrphan(ctx context.Context, from, to, by string) (moved, kept int, err error) {
	moved, kept, err = o.app.sender.MoveOrphan(ctx, from, to)
	if moved > 0 || kept > 0 || err == nil {
		o.logger.Info("orphaned destination moved", zap.String("from", from), zap.String("to", to),
			zap.Int("moved", moved), zap.Int("kept", kept), zap.String("by", by), zap.Error(err))
	}
	return moved, kept, err
}

// PurgeOrphan deletes everything the store holds of an orphan.
func (o ops) PurgeOrphan(ctx context.Context, name, by string) (int, error) {
	n, err := o.app.sender.PurgeOrphan(ctx, name)
	if err == nil {
		o.logger.Warn("orphaned destination purged", zap.String("destination", name), zap.Int("removed", n), zap.String("by", by))
	}
	return n, err
}

// Destination reads one destination's health.
func (o ops) Destination(ctx context.Context, name string) (sender.DestinationStatus, error) {
	return o.app.sender.Status(ctx, name)
}

// SetPaused pauses or resumes a destination; by names who asked.
func (o ops) SetPaused(ctx context.Context, name string, paused bool, by string) (sender.DestinationStatus, error) {
	if !o.app.hasDestination(name) {
		return sender.DestinationStatus{}, sender.ErrUnknownDestination
	}
	// A subscriber's pause is kept under the subscriber's name alone,
	// and a subscriber resumes only its own; everyone else's resume is
	// any pause's.
	stored := by
	switch {
	case strings.HasPrefix(by, sender.SubscriberPause("")):
		stored, _, _ = strings.Cut(by, " ") // the subscriber alone
	case !paused:
		stored = "" // any pause
	}
	// The sender holds its own workers at once, writes the store, and
	// wakes the workers on a resume.
	if err := o.app.sender.SetPaused(ctx, name, paused, stored); err != nil {
		return sender.DestinationStatus{}, err
	}
	action := "destination resumed"
	if paused {
		action = "destination paused"
	}
	o.logger.Info(action, zap.String("destination", name), zap.String("by", by))
	return o.app.sender.Status(ctx, name)
}

// Summary groups the dead letters f matches by destination and class, at
// most upTo of them when upTo is above 0.
func (o ops) Summary(ctx context.Context, f sender.Filter, upTo int) ([]sender.Group, int, bool, error) {
	return o.app.dlq.Summary(ctx, f, upTo)
}

// Count counts the dead letters f matches, up to upTo.
func (o ops) Count(ctx context.Context, f sender.Filter, upTo int) (int, bool, error) {
	return o.app.dlq.Count(ctx, f, upTo)
}

// List pages through the dead letters f matches.
func (o ops) List(ctx context.Context, f sender.Filter, limit int, cursor string) ([]*sender.Meta, string, error) {
	return o.app.dlq.List(ctx, f, limit, cursor)
}

// Get reads one envelope of dest ("" for any destination).
func (o ops) Get(ctx context.Context, dest, id string) (*sender.Envelope, sender.State, error) {
	return o.app.dlq.Get(ctx, dest, id)
}

// HeaderSent is the header e's next attempt carries, secrets redacted.
func (o ops) HeaderSent(e *sender.Envelope) (http.Header, error) {
	return o.app.sender.HeaderSent(e)
}

// Redrive moves up to limit of the dead letters f matches back to the
// queue under a new redrive ID (a dry run only counts), then wakes the
// workers.
func (o ops) Redrive(ctx context.Context, f sender.Filter, limit int, by string, dryRun bool) (*sender.Redrive, error) {
	rd, err := o.app.dlq.Redrive(ctx, f, limit, by, dryRun)
	if rd != nil && rd.Moved > 0 {
		o.app.metrics.redriven(ctx, rd.Letters)
		o.logger.Info("redrive", zap.String("redrive_id", rd.ID), zap.Int("matched", rd.Matched), zap.Int("moved", rd.Moved), zap.String("by", by), zap.Error(err))
		for _, d := range o.app.sender.Destinations() {
			o.app.sender.Wake(d)
		}
	}
	return rd, err
}

// Progress reads a redrive's audit record and what became of its letters;
// with a scope, only a redrive confined to that destination.
func (o ops) Progress(ctx context.Context, id, scope string) (*sender.Redrive, error) {
	return o.app.dlq.Progress(ctx, id, scope)
}

// Purge deletes the dead letters f matches.
func (o ops) Purge(ctx context.Context, f sender.Filter, by string) (int, error) {
	n, err := o.app.dlq.Purge(ctx, f)
	if n > 0 {
		o.logger.Info("dead letters purged", zap.Int("removed", n), zap.Strings("ids", f.IDs), zap.String("by", by))
	}
	return n, err
}
