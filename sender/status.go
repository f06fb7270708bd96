package sender

import (
	"context"
	"net/http"

	"github.com/sony/gobreaker/v2"
)

// DestinationStatus is a destination's live health, as the admin API and
// the console show it.
type DestinationStatus struct {
	Name string `json:"name"`
	// State is "active" or "paused".
	State string `json:"state"`
	// Breaker is "closed", "open" or "half_open".
	Breaker string `json:"breaker"`
	// Depth counts envelopes by state: queued, leased, paused (queued on a
	// paused destination), dead and corrupt.
	// PausedBy names who paused it: "gone" for a 410, else the door an
	// operator used.
	PausedBy       string         `json:"paused_by,omitempty"`
	Depth          map[string]int `json:"depth"`
	OldestReadyAge float64        `json:"oldest_ready_age_seconds"`
}

// Status reads dest's health; ErrUnknownDestination when there is no such
// destination.
func (s *Sender) Status(ctx context.Context, dest string) (DestinationStatus, error) {
	d, ok := s.dests[dest]
	if !ok {
		return DestinationStatus{}, ErrUnknownDestination
	}
	st, err := s.queue.Stats(ctx, dest, s.now())
	if err != nil {
		return DestinationStatus{}, err
	}
	v := DestinationStatus{Name: dest, State: "active", Breaker: breakerName[d.state()],
		Depth:          map[string]int{"queued": st.Queued, "leased": st.Leased, "paused": 0, "dead": st.Dead, "corrupt": st.Corrupt},
		OldestReadyAge: st.OldestReady.Seconds()}
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
	d, ok := s.dests[e.Destination]
	if !ok {
		return nil, ErrUnknownDestination
	}
	h := d.header(e, s.now())
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
		for k, vs := range d.Signer.Sign(e.ID, s.now(), e.Payload) {
			if len(vs) != 1 || vs[0] != e.ID {
				h[k] = []string{"(computed at each attempt)"}
			}
		}
	}
	return h, nil
}
