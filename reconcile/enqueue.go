package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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
// (unix//path), as package adminclient reads it.
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
	body, err := json.Marshal(map[string]any{
		"id": e.ID, "event_type": e.Type, "entity": e.Entity, "payload": json.RawMessage(e.Payload),
		"event_time": e.EventTime.UTC().Format(time.RFC3339Nano),
	})
	if err != nil {
		return 0, err
	}
	u := a.admin.URL("/hookgate/destinations/" + url.PathEscape(a.destination) + "/enqueue")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.admin.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }() // a response body: nothing to flush
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode < 300 {
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
	var p problem.Details
	_ = json.Unmarshal(b, &p) // an answer that is no problem+json leaves p empty: the status alone is reported
	switch {
	case resp.StatusCode == http.StatusUnprocessableEntity && p.Reason == "key_reused_with_different_payload":
		return AlreadyEnqueued, nil
	case resp.StatusCode == http.StatusBadRequest && p.Reason == "bad_id":
		return 0, fmt.Errorf("%w: the admin API answered 400 bad_id: %s", sender.ErrBadID, p.Detail)
	case p.Reason != "":
		return 0, fmt.Errorf("the admin API answered %d %s: %s", resp.StatusCode, p.Reason, p.Detail)
	}
	return 0, fmt.Errorf("the admin API answered %s", resp.Status)
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
