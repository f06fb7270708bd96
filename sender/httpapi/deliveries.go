package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/sender"
)

// DeliveryEntry is a settled envelope in the history: an entry of GET
// /hookgate/deliveries, and a line of `hookgate deliveries export`; with
// state=queued, an envelope not yet settled (queued, or leased: in
// flight), without settled_at.
type DeliveryEntry struct {
	ID          string       `json:"id"`
	Destination string       `json:"destination"`
	EventType   string       `json:"event_type"`
	Entity      string       `json:"entity"`
	State       sender.State `json:"state"`
	Attempts    int          `json:"attempts"`
	CreatedAt   time.Time    `json:"created_at"`
	SettledAt   time.Time    `json:"settled_at,omitzero"`
	LastStatus  int          `json:"last_status"`
	// Behind is, with state=queued, the ID of the head its entity waits
	// behind (ordering entity); Held, that the head is a dead letter that
	// holds the entity (on_dead hold).
	Behind string `json:"behind,omitempty"`
	Held   bool   `json:"held,omitempty"`
	// Received is what durable ingress kept of the request, masked, in
	// the answers that ask for it (received=true, as the export does)
	// while the history keeps the payload; nil otherwise.
	Received *ReceivedView `json:"received,omitempty"`
}

// DeliveryEntryOf is the list entry of a settled envelope's record.
func DeliveryEntryOf(m *sender.Meta) DeliveryEntry {
	return DeliveryEntry{ID: m.ID, Destination: m.Destination, EventType: m.EventType, Entity: m.Entity,
		State: m.State, Attempts: m.Tried, CreatedAt: m.CreatedAt, SettledAt: m.SettledAt, LastStatus: m.LastStatus,
		Behind: m.Behind, Held: m.Held}
}

// DeliveriesPage is the answer of GET /hookgate/deliveries.
type DeliveriesPage struct {
	Entries    []DeliveryEntry `json:"entries"`
	NextCursor string          `json:"next_cursor"`
}

// MaxDeliveriesPage is the largest limit of GET /hookgate/deliveries.
const MaxDeliveriesPage = 1000

// ResendRequest is the body of POST /hookgate/deliveries/resend. Times are
// RFC 3339 and bound when an envelope settled.
type ResendRequest struct {
	Destination string `json:"destination"`
	// Tenant keeps the tenant's destinations only.
	Tenant    string   `json:"tenant,omitempty"`
	EventType string   `json:"event_type"`
	Since     string   `json:"since"`
	Until     string   `json:"until"`
	IDs       []string `json:"ids"`
	// State is delivered or dead; "" resends both.
	State  string `json:"state"`
	Limit  int    `json:"limit"`
	DryRun bool   `json:"dry_run"`
	// By is who the caller says it is, for the audit record; default
	// "admin api from <address>".
	By string `json:"by"`
}

// Query is the request's selection; a time that is not RFC 3339 is a 400
// bad_request Error.
func (in ResendRequest) Query() (sender.HistoryQuery, error) {
	q := sender.HistoryQuery{Destination: in.Destination, Tenant: in.Tenant, EventType: in.EventType, IDs: in.IDs, State: sender.State(in.State)}
	var err error
	if q.Since, err = parseTimeParam("since", in.Since); err != nil {
		return q, err
	}
	q.Until, err = parseTimeParam("until", in.Until)
	return q, err
}

// listDeliveries serves GET /hookgate/deliveries: a page of the settled
// envelopes the query matches, newest first. A page may hold fewer than
// limit, even none, and still a next_cursor: the search looks at a
// bounded number of entries per request, and older ones may match. With
// received=true, each entry that durable ingress stored carries what it
// kept of the request: that reads the entry's stored payload, one read
// each, so only the export asks for it. With state=queued it lists the
// envelopes not yet settled instead, in flight first, then by when due:
// the first limit, with no next_cursor (the destinations' depth counts
// them all); since and until, which bound when an envelope settled, are
// refused with it.
func (h *Handler) listDeliveries(w http.ResponseWriter, r *http.Request) error {
	v := r.URL.Query()
	q, err := ResendRequest{Destination: v.Get("destination"), Tenant: v.Get("tenant"), EventType: v.Get("event_type"),
		State: v.Get("state"), Since: v.Get("since"), Until: v.Get("until")}.Query()
	if err != nil {
		return err
	}
	q.Entity, q.ID = v.Get("entity"), v.Get("id")
	limit := 50
	if s := v.Get("limit"); s != "" {
		if limit, err = strconv.Atoi(s); err != nil || limit <= 0 || limit > MaxDeliveriesPage {
			return Errorf(problem.BadLimit, "limit: want 1 to %d, got %q", MaxDeliveriesPage, s)
		}
	}
	withReceived := false
	if s := v.Get("received"); s != "" {
		if withReceived, err = strconv.ParseBool(s); err != nil {
			return Errorf(problem.BadRequest, "received: want true or false, got %q", s)
		}
	}
	page, next, err := h.ops.History(r.Context(), q, v.Get("cursor"), limit)
	if err != nil {
		return err
	}
	out := DeliveriesPage{Entries: make([]DeliveryEntry, 0, len(page)), NextCursor: next}
	for _, m := range page {
		entry := DeliveryEntryOf(m)
		if withReceived && m.ReceivedSize > 0 {
			if entry.Received, err = h.received(r.Context(), m); err != nil {
				return err
			}
		}
		out.Entries = append(out.Entries, entry)
	}
	return WriteJSON(w, http.StatusOK, out)
}

// received reads what durable ingress kept of m's request: nil once the
// history no longer keeps the payload it is stored with, or the entry
// itself (it expired since the page was read).
func (h *Handler) received(ctx context.Context, m *sender.Meta) (*ReceivedView, error) {
	e, _, err := h.ops.Delivery(ctx, m.Destination, m.ID)
	if errors.Is(err, sender.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return ReceivedOf(e.Received), nil
}

// showDelivery serves GET /hookgate/deliveries/<destination>/<id>: the
// envelope in whatever state it is, with its attempt log and its payload
// (or "payload_expired":true once the history no longer keeps it), and
// what durable ingress kept of its request ("received", redact_headers
// values masked) while the payload, which holds it, is kept.
func (h *Handler) showDelivery(w http.ResponseWriter, r *http.Request, dest, id string) error {
	e, state, err := h.ops.Delivery(r.Context(), dest, id)
	if err != nil {
		return err
	}
	log := make([]attemptView, 0, len(e.Log))
	for _, at := range e.Log {
		log = append(log, attemptView{At: at.At, Status: at.Status, Error: at.Error, LatencyMs: float64(at.Latency.Microseconds()) / 1000, RedriveID: at.RedriveID})
	}
	var payload any
	switch {
	case e.PayloadExpired:
	case json.Valid(e.Payload):
		payload = json.RawMessage(e.Payload)
	default:
		payload = string(e.Payload)
	}
	out := map[string]any{
		"id": e.ID, "destination": e.Destination, "state": state, "event_type": e.EventType, "entity": e.Entity,
		"event_time": zeroNil(e.EventTime), "created_at": e.CreatedAt, "payload": payload,
		"class": e.Class.String(), "last_status": e.LastStatus, "last_error": e.LastError,
		"attempts": len(e.Log), "redrive_id": e.RedriveID, "dead_at": zeroNil(e.DeadAt), "attempt_log": log,
	}
	if e.PayloadExpired {
		out["payload_expired"] = true
	}
	if e.Received != nil {
		out["received"] = ReceivedOf(e.Received)
	}
	return WriteJSON(w, http.StatusOK, out)
}

// resend serves POST /hookgate/deliveries/resend, answered as a redrive
// is: {"redrive_id","matched","more","moved"}, its progress at GET
// /hookgate/redrives/<redrive_id>. matched counts up to the limit (a dry
// run's, up to max_redrive); more says that others match beyond it.
func (h *Handler) resend(w http.ResponseWriter, r *http.Request) error {
	var in ResendRequest
	if err := decodeBody(r, &in); err != nil {
		return err
	}
	q, err := in.Query()
	if err != nil {
		return err
	}
	who := in.By
	if who == "" {
		who = by(r)
	}
	rd, err := h.ops.Resend(r.Context(), q, in.Limit, who, in.DryRun)
	if rd != nil && !in.DryRun {
		// in.By is the caller's claim: the admin endpoint knows no identity.
		h.logger.Info("resend through the admin API", "redrive_id", rd.ID,
			"claimed_by", in.By, "remote_addr", r.RemoteAddr)
	}
	if err != nil && rd != nil && rd.ID != "" {
		return Errorf(problem.StoreUnavailable,
			"resend %s moved %d before the store failed (%v): see GET /hookgate/redrives/%s before resending again", rd.ID, rd.Moved, err, rd.ID)
	}
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, map[string]any{"redrive_id": rd.ID, "matched": rd.Matched, "more": rd.More, "moved": rd.Moved})
}
