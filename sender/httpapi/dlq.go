package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/sender"
)

// DeadEntry is a dead letter in a list: an entry of GET /hookgate/dlq.
type DeadEntry struct {
	ID          string    `json:"id"`
	Destination string    `json:"destination"`
	EventType   string    `json:"event_type"`
	Class       string    `json:"class"`
	LastStatus  int       `json:"last_status"`
	LastError   string    `json:"last_error"`
	Attempts    int       `json:"attempts"`
	DeadAt      time.Time `json:"dead_at"`
}

// EntryOf is the list entry of a dead letter's record.
func EntryOf(e *sender.Meta) DeadEntry {
	return DeadEntry{ID: e.ID, Destination: e.Destination, EventType: e.EventType, Class: e.Class.String(),
		LastStatus: e.LastStatus, LastError: e.LastError, Attempts: e.Tried, DeadAt: e.DeadAt}
}

// RedriveRequest is the body of POST /hookgate/dlq/redrive. Times are
// RFC 3339.
type RedriveRequest struct {
	Destination string `json:"destination"`
	// Tenant keeps the tenant's destinations only.
	Tenant string   `json:"tenant,omitempty"`
	Class  string   `json:"class"`
	Since  string   `json:"since"`
	Until  string   `json:"until"`
	IDs    []string `json:"ids"`
	Limit  int      `json:"limit"`
	DryRun bool     `json:"dry_run"`
	// By is who the caller says it is, for the audit record; default
	// "admin api from <address>".
	By string `json:"by"`
}

// Filter is the request's filter; a time that is not RFC 3339 is a 400
// bad_request Error.
func (in RedriveRequest) Filter() (sender.Filter, error) {
	f := sender.Filter{Destination: in.Destination, Tenant: in.Tenant, Class: in.Class, IDs: in.IDs}
	var err error
	if f.Since, err = parseTimeParam("since", in.Since); err != nil {
		return f, err
	}
	f.Until, err = parseTimeParam("until", in.Until)
	return f, err
}

// filterOf reads a filter from query parameters.
func filterOf(q map[string][]string) (sender.Filter, error) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	return RedriveRequest{Destination: get("destination"), Tenant: get("tenant"), Class: get("class"), IDs: q["id"],
		Since: get("since"), Until: get("until")}.Filter()
}

func parseTimeParam(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return t, Errorf(problem.BadRequest, "%s: want RFC 3339, got %q", name, v)
	}
	return t, nil
}

// listDead serves GET /hookgate/dlq: a page of the dead letters the
// filter matches.
func (h *Handler) listDead(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f, err := filterOf(q)
	if err != nil {
		return err
	}
	limit := 50
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit <= 0 || limit > 1000 {
			return Errorf(problem.BadRequest, "limit: want 1 to 1000")
		}
	}
	page, next, err := h.ops.List(r.Context(), f, limit, q.Get("cursor"))
	if err != nil {
		return err
	}
	entries := make([]DeadEntry, 0, len(page))
	for _, e := range page {
		entries = append(entries, EntryOf(e))
	}
	return WriteJSON(w, http.StatusOK, map[string]any{"entries": entries, "next_cursor": next})
}

// summary serves GET /hookgate/dlq/summary: the dead letters grouped by
// destination and class.
func (h *Handler) summary(w http.ResponseWriter, r *http.Request) error {
	f, err := filterOf(r.URL.Query())
	if err != nil {
		return err
	}
	groups, total, _, err := h.ops.Summary(r.Context(), f, 0)
	if err != nil {
		return err
	}
	if groups == nil {
		groups = []sender.Group{}
	}
	return WriteJSON(w, http.StatusOK, map[string]any{"groups": groups, "total": total})
}

// attemptView is one attempt in an envelope's detail.
type attemptView struct {
	At        time.Time `json:"at"`
	Status    int       `json:"status"`
	Error     string    `json:"error"`
	LatencyMs float64   `json:"latency_ms"`
	RedriveID string    `json:"redrive_id,omitempty"`
}

// showDead serves GET /hookgate/dlq/<id>: the envelope with its payload
// and attempt log, and what durable ingress kept of its request
// ("received", redact_headers values masked) when it kept any.
func (h *Handler) showDead(w http.ResponseWriter, r *http.Request, id string) error {
	e, state, err := h.ops.Get(r.Context(), r.URL.Query().Get("destination"), id)
	if err != nil {
		return err
	}
	log := make([]attemptView, 0, len(e.Log))
	for _, at := range e.Log {
		log = append(log, attemptView{At: at.At, Status: at.Status, Error: at.Error, LatencyMs: float64(at.Latency.Microseconds()) / 1000, RedriveID: at.RedriveID})
	}
	var payload any = string(e.Payload)
	if json.Valid(e.Payload) {
		payload = json.RawMessage(e.Payload)
	}
	out := map[string]any{
		"id": e.ID, "destination": e.Destination, "state": state, "event_type": e.EventType, "entity": e.Entity,
		"event_time": zeroNil(e.EventTime), "created_at": e.CreatedAt, "payload": payload,
		"class": e.Class.String(), "last_status": e.LastStatus, "last_error": e.LastError,
		"attempts": len(e.Log), "redrive_id": e.RedriveID, "dead_at": zeroNil(e.DeadAt), "attempt_log": log,
	}
	if e.Received != nil {
		out["received"] = ReceivedOf(e.Received)
	}
	return WriteJSON(w, http.StatusOK, out)
}

func zeroNil(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// deleteDead serves DELETE /hookgate/dlq/<id>.
func (h *Handler) deleteDead(w http.ResponseWriter, r *http.Request, id string) error {
	f := sender.Filter{Destination: r.URL.Query().Get("destination"), IDs: []string{id}}
	res, err := h.ops.Purge(r.Context(), f, sender.PurgeOptions{}, by(r))
	if err != nil {
		return err
	}
	if res.Removed == 0 {
		return Errorf(problem.NotFound, "no dead letter %q", id)
	}
	return WriteJSON(w, http.StatusOK, map[string]int{"removed": res.Removed})
}

// redrive serves POST /hookgate/dlq/redrive.
func (h *Handler) redrive(w http.ResponseWriter, r *http.Request) error {
	var in RedriveRequest
	if err := decodeBody(r, &in); err != nil {
		return err
	}
	f, err := in.Filter()
	if err != nil {
		return err
	}
	who := in.By
	if who == "" {
		who = by(r)
	}
	rd, err := h.ops.Redrive(r.Context(), f, in.Limit, who, in.DryRun)
	if rd != nil && !in.DryRun {
		// in.By is the caller's claim: the admin endpoint knows no identity.
		h.logger.Info("redrive through the admin API", "redrive_id", rd.ID,
			"claimed_by", in.By, "remote_addr", r.RemoteAddr)
	}
	if err != nil && rd != nil && rd.ID != "" {
		return Errorf(problem.StoreUnavailable,
			"redrive %s moved %d before the store failed (%v): see GET /hookgate/redrives/%s before redriving again", rd.ID, rd.Moved, err, rd.ID)
	}
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, map[string]any{"redrive_id": rd.ID, "matched": rd.Matched, "moved": rd.Moved})
}

// progress serves GET /hookgate/redrives/<id>: a redrive's audit record
// and what became of its letters.
func (h *Handler) progress(w http.ResponseWriter, r *http.Request, id string) error {
	rd, err := h.ops.Progress(r.Context(), id, sender.Scope{})
	if errors.Is(err, sender.ErrNotFound) {
		return Errorf(problem.NotFound, "no redrive %q", id)
	}
	if err != nil {
		return err
	}
	rd.Letters = nil
	return WriteJSON(w, http.StatusOK, rd)
}

// PurgeRequest is the body of POST /hookgate/dlq/purge: the filter of a
// redrive, and All, which an empty filter needs (a purge of every dead
// letter is said, never implied). Limit bounds it as it bounds a redrive
// (1 to max_redrive; it may be left out when IDs are named, or on a dry
// run); a dry run only counts.
type PurgeRequest struct {
	RedriveRequest      // its fields, at the top level of the JSON
	All            bool `json:"all"`
}

// purge serves POST /hookgate/dlq/purge: {"matched","removed"}.
func (h *Handler) purge(w http.ResponseWriter, r *http.Request) error {
	var in PurgeRequest
	if err := decodeBody(r, &in); err != nil {
		return err
	}
	f, err := in.Filter()
	if err != nil {
		return err
	}
	who := by(r)
	if in.By != "" {
		// in.By is the caller's claim: the admin endpoint knows no identity.
		who = in.By + ", " + who
	}
	res, err := h.ops.Purge(r.Context(), f, sender.PurgeOptions{Limit: in.Limit, All: in.All, DryRun: in.DryRun}, who)
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, res)
}
