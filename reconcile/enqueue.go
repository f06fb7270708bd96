package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/hookgate/hookgate/internal/adminclient"
	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/sender"
)

// The two doors a repair event goes through: a running gateway's admin
// API (the command), or the sender in process (a scheduled run). Both
// count a duplicate, with this payload or another, as AlreadyEnqueued.

// AdminEnqueuer enqueues repair events through a running gateway's admin
// API (POST /hookgate/destinations/<name>/enqueue), as the command does.
type AdminEnqueuer struct {
	admin       *adminclient.Endpoint
	destination string
}

// NewAdminEnqueuer enqueues to destination through the admin API at
// addr (the command's --address): a host:port, a URL, or a unix socket
// (unix//path), as package adminclient reads it; "" is its default
// (CADDY_ADMIN, else localhost:2019).
func NewAdminEnqueuer(addr, destination string) (*AdminEnqueuer, error) {
	admin, err := adminclient.New(addr, 60*time.Second)
	if err != nil {
		return nil, err
	}
	return &AdminEnqueuer{admin: admin, destination: destination}, nil
}

// Enqueue implements Enqueuer: a 202 is Enqueued, or AlreadyEnqueued when
// it says duplicate; a 422 key_reused_with_different_payload is
// AlreadyEnqueued; a 400 bad_id wraps sender.ErrBadID.
func (a *AdminEnqueuer) Enqueue(ctx context.Context, e Event) (Outcome, error) {
	b, err := a.admin.Call(ctx, http.MethodPost, "/hookgate/destinations/"+url.PathEscape(a.destination)+"/enqueue", map[string]any{
		"id": e.ID, "event_type": e.Type, "entity": e.Entity, "payload": json.RawMessage(e.Payload),
		"event_time": e.EventTime.UTC().Format(time.RFC3339Nano),
	})
	if ae, ok := errors.AsType[*adminclient.Error](err); ok {
		switch {
		case ae.Status == http.StatusUnprocessableEntity && ae.Reason == "key_reused_with_different_payload":
			return AlreadyEnqueued, nil
		case ae.Status == problem.BadID.Status && ae.Reason == problem.BadID.Code:
			return 0, fmt.Errorf("%w: the admin API answered 400 bad_id: %s", sender.ErrBadID, ae.Detail)
		case ae.Reason != "":
			return 0, fmt.Errorf("the admin API answered %d %s: %s", ae.Status, ae.Reason, ae.Detail)
		}
		return 0, fmt.Errorf("the admin API answered %d %s", ae.Status, http.StatusText(ae.Status))
	}
	if err != nil {
		return 0, err
	}
	var answer struct {
		Duplicate bool `json:"duplicate"`
	}
	if err := json.Unmarshal(b, &answer); err != nil {
		return 0, fmt.Errorf("the admin API's answer: %w", err)
	}
	if answer.Duplicate {
		return AlreadyEnqueued, nil
	}
	return Enqueued, nil
}

// EnvelopeEnqueuer is the part of the sender a SenderEnqueuer needs.
type EnvelopeEnqueuer interface {
	Enqueue(ctx context.Context, e *sender.Envelope) (sender.EnqueueResult, error)
}

// SenderEnqueuer enqueues repair events to Destination through a sender
// in process, as a scheduled run does.
type SenderEnqueuer struct {
	Sender      EnvelopeEnqueuer
	Destination string
}

// Enqueue implements Enqueuer: a duplicate, with this payload or another,
// is AlreadyEnqueued.
func (s SenderEnqueuer) Enqueue(ctx context.Context, e Event) (Outcome, error) {
	res, err := s.Sender.Enqueue(ctx, &sender.Envelope{
		ID: e.ID, Destination: s.Destination, EventType: e.Type,
		Entity: e.Entity, EventTime: e.EventTime, Payload: e.Payload,
	})
	switch {
	case err != nil:
		return 0, err
	case res.Duplicate || res.Mismatch:
		return AlreadyEnqueued, nil
	}
	return Enqueued, nil
}
