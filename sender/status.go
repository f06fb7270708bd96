package sender

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/hookgate/hookgate/verify"
	"github.com/sony/gobreaker/v2"
)

// DestinationStatus is a destination's live health, as the admin API and
// the console show it.
type DestinationStatus struct {
	Name string `json:"name"`
	// Tenant owns it (TenantOf its name); "" for none.
	Tenant string `json:"tenant,omitempty"`
	// State is "active", "paused" or "orphaned".
	State string `json:"state"`
	// Source is "caddyfile" or "api": where it was made; "" for an
	// orphan. The sender leaves it to the admin API, which knows.
	Source string `json:"source,omitempty"`
	// Version is the version of an API destination this instance
	// delivers with (its view's version, once applied here); "" for the
	// others.
	Version string `json:"version,omitempty"`
	// Breaker is "closed", "open" or "half_open"; "" for an orphan.
	Breaker string `json:"breaker,omitempty"`
	// Ordering is "none" or "entity"; OnDead, "skip" or "hold" under
	// ordering entity. Both "" for an orphan.
	Ordering string `json:"ordering,omitempty"`
	OnDead   string `json:"on_dead,omitempty"`
	// Headers are its own headers, a value whose name says it may be a
	// secret (SecretHeader) shown as Redacted.
	Headers map[string]string `json:"headers,omitempty"`
	// PausedBy names who paused it: "gone" for a 410, else the door an
	// operator used.
	PausedBy string `json:"paused_by,omitempty"`
	// Depth counts envelopes by state: queued, leased, paused (queued on a
	// paused destination), dead and corrupt; and waiting (the queued or
	// paused that wait behind their entity's head) and held (entities
	// held behind a dead head), under ordering.
	Depth          map[string]int `json:"depth"`
	OldestReadyAge float64        `json:"oldest_ready_age_seconds"`
}

// Status reads dest's health; ErrUnknownDestination when there is no such
// destination.
func (s *Sender) Status(ctx context.Context, dest string) (DestinationStatus, error) {
	d, ok := s.dest(dest)
	if !ok {
		return DestinationStatus{}, ErrUnknownDestination
	}
	st, err := s.queue.Stats(ctx, dest, s.now())
	if err != nil {
		return DestinationStatus{}, err
	}
	v := DestinationStatus{Name: dest, Tenant: TenantOf(dest), State: "active", Version: d.Rev, Breaker: breakerName[d.state()],
		Depth: map[string]int{"queued": st.Queued, "leased": st.Leased, "paused": 0, "dead": st.Dead, "corrupt": st.Corrupt,
			"waiting": st.Waiting, "held": st.Held},
		OldestReadyAge: st.OldestReady.Seconds()}
	v.Ordering, v.OnDead = d.Ordering.Words()
	for name, vals := range d.Header {
		if v.Headers == nil {
			v.Headers = make(map[string]string, len(d.Header))
		}
		v.Headers[name] = strings.Join(vals, ", ")
		if SecretHeader(name) {
			v.Headers[name] = Redacted
		}
	}
	if st.Paused {
		v.State, v.PausedBy, v.Depth["queued"], v.Depth["paused"] = "paused", st.PausedBy, 0, st.Queued
	}
	return v, nil
}

var breakerName = map[gobreaker.State]string{
	gobreaker.StateClosed:   "closed",
	gobreaker.StateHalfOpen: "half_open",
	gobreaker.StateOpen:     "open",
}

// Redacted stands for a header value that is not shown.
const Redacted = "(not shown)"

// HeaderSent is the header e's next attempt carries, for a person to read:
// the values a secret could be in are replaced. The destination's own
// header values are configuration (an Authorization, say) and shown as
// Redacted, but for Content-Type; the signature and its timestamp change
// with each attempt and are shown as such; the delivery ID is shown.
func (s *Sender) HeaderSent(e *Envelope) (http.Header, error) {
	d, ok := s.dest(e.Destination)
	if !ok {
		return nil, ErrUnknownDestination
	}
	h, err := d.header(e, s.now())
	if err != nil {
		return nil, err
	}
	if e.Received != nil {
		for _, k := range e.Received.Redact {
			if _, ok := h[k]; ok {
				h[k] = []string{Redacted}
			}
		}
	}
	for k := range d.Header {
		if k != "Content-Type" {
			h[k] = []string{Redacted}
		}
	}
	if !e.DeadAt.IsZero() {
		// A dead letter is sent again only by a redrive, under its ID.
		h.Set("Hookgate-Redrive-Id", "(the ID of the redrive that sends it)")
	}
	if d.Signer != nil {
		sig, _ := d.Signer.SignRequest(verify.Request{Method: http.MethodPost, URL: d.target(e), Header: h, Body: e.Payload}, e.ID, s.now())
		for k, vs := range sig {
			if len(vs) != 1 || vs[0] != e.ID {
				h[k] = []string{"(computed at each attempt)"}
			}
		}
	}
	return h, nil
}

// StateOrphaned is the state of a destination the store holds envelopes
// of but the configuration no longer names (a rename, a removal).
const StateOrphaned = "orphaned"

// ErrConfigured means an orphan's operation was asked of a configured
// destination.
var ErrConfigured = errors.New("destination is configured")

// Orphans lists the destinations the store holds envelopes of (queued,
// leased or dead) that are not configured, in byte order, with their
// depth and state "orphaned" (they have no breaker). Nothing of theirs is
// delivered, and nothing trimmed (an orphan settles nothing), until an
// operator moves them to a configured destination or purges them.
func (s *Sender) Orphans(ctx context.Context) ([]DestinationStatus, error) {
	names, err := Orphans(ctx, s.queue, s.Destinations())
	if err != nil {
		return nil, err
	}
	out := []DestinationStatus{}
	for _, name := range names {
		st, err := s.queue.Stats(ctx, name, s.now())
		if err != nil {
			return nil, err
		}
		if st.Queued+st.Leased+st.Dead+st.Corrupt == 0 {
			continue // delivered IDs, or a pause: nothing stranded
		}
		out = append(out, DestinationStatus{Name: name, Tenant: TenantOf(name), State: StateOrphaned,
			Depth: map[string]int{"queued": st.Queued, "leased": st.Leased, "paused": 0, "dead": st.Dead, "corrupt": st.Corrupt,
				"waiting": st.Waiting, "held": st.Held},
			OldestReadyAge: st.OldestReady.Seconds()})
	}
	return out, nil
}

// orphan checks that name is not configured and that the store holds
// something of it.
func (s *Sender) orphan(ctx context.Context, name string) error {
	if _, ok := s.dest(name); ok {
		return fmt.Errorf("%w: %q is delivered to; only an orphan can be moved or purged", ErrConfigured, name)
	}
	names, err := s.queue.Destinations(ctx)
	if err != nil {
		return err
	}
	if !slices.Contains(names, name) {
		return fmt.Errorf("%w %q: the store holds nothing of it", ErrUnknownDestination, name)
	}
	return nil
}

// MoveOrphan moves every queued, leased and dead envelope of the orphan
// from to the configured destination to, IDs, attempt logs and redrive
// IDs kept, and wakes to. An ID that to holds already with another
// payload stays in from, and counts as kept.
func (s *Sender) MoveOrphan(ctx context.Context, from, to string) (moved, kept int, err error) {
	if err := s.orphan(ctx, from); err != nil {
		return 0, 0, err
	}
	if _, ok := s.dest(to); !ok {
		return 0, 0, fmt.Errorf("%w %q: move to a configured destination", ErrUnknownDestination, to)
	}
	moved, kept, err = s.queue.Move(ctx, from, to, s.now())
	if moved > 0 {
		s.Wake(to)
	}
	return moved, kept, err
}

// PurgeOrphan deletes everything the store holds of the orphan name; it
// answers how many envelopes went.
func (s *Sender) PurgeOrphan(ctx context.Context, name string) (int, error) {
	if err := s.orphan(ctx, name); err != nil {
		return 0, err
	}
	return s.queue.Drop(ctx, name)
}

// WarnOrphans logs each orphaned destination (a rename, a removal): its
// envelopes are kept, and not delivered, until moved or purged. The
// gateway calls it once per config load.
func (s *Sender) WarnOrphans(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	orphans, err := s.Orphans(ctx)
	if err != nil {
		s.logger.Warn("could not look for orphaned destinations", "error", err)
		return
	}
	for _, o := range orphans {
		s.logger.Warn("the store holds envelopes of a destination this config does not name (renamed or removed?): "+
			"they are kept and not delivered; move them with 'hookgate destinations move <orphan> <destination>', or purge them",
			"destination", o.Name, "queued", o.Depth["queued"]+o.Depth["leased"], "dead", o.Depth["dead"])
	}
}
