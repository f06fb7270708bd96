package caddymodule

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/sender"
)

func init() {
	caddy.RegisterModule(adminAPI{})
}

// adminAPI serves hookgate's admin endpoints under /hookgate/ on Caddy's
// admin endpoint: the sender's destinations and dead letters. JSON in and
// out; errors are problem+json.
type adminAPI struct {
	app    *App // the running app, set per request; nil when none runs
	logger *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (adminAPI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.hookgate",
		New: func() caddy.Module { return new(adminAPI) },
	}
}

// Provision sets up the logger. The app is found at each request: it is
// the hookgate app that runs (see running), not the one of the config this
// module was provisioned with, which Caddy may have refused.
func (a *adminAPI) Provision(ctx caddy.Context) error {
	a.logger = ctx.Logger(a)
	return nil
}

// Routes returns the admin routes.
func (a *adminAPI) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{{Pattern: "/hookgate/", Handler: caddy.AdminHandlerFunc(a.serve)}}
}

// apiError is an admin API failure, answered as problem+json.
type apiError struct {
	status int
	reason string
	err    error
}

func (e apiError) Error() string { return e.err.Error() }

func fail(status int, reason string, format string, args ...any) error {
	return apiError{status: status, reason: reason, err: fmt.Errorf(format, args...)}
}

func (a *adminAPI) serve(w http.ResponseWriter, r *http.Request) error {
	err := (&adminAPI{app: runningApp(), logger: a.logger}).route(w, r)
	var ae apiError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae):
		problem.Write(w, ae.status, ae.reason, ae.err.Error(), 0)
	case errors.Is(err, sender.ErrBadLimit):
		problem.Write(w, http.StatusBadRequest, "bad_limit", err.Error(), 0)
	case errors.Is(err, sender.ErrBadFilter):
		problem.Write(w, http.StatusBadRequest, "bad_request", err.Error(), 0)
	case errors.Is(err, sender.ErrConfigured):
		problem.Write(w, http.StatusConflict, "destination_configured", err.Error(), 0)
	case errors.Is(err, sender.ErrOrphaned):
		problem.Write(w, http.StatusConflict, "destination_orphaned", err.Error(), 0)
	case errors.Is(err, sender.ErrUnknownDestination):
		problem.Write(w, http.StatusNotFound, "unknown_destination", err.Error(), 0)
	case errors.Is(err, sender.ErrNotFound):
		problem.Write(w, http.StatusNotFound, "not_found", err.Error(), 0)
	default:
		a.logger.Error("admin request failed", zap.String("path", r.URL.Path), zap.Error(err))
		problem.Write(w, http.StatusServiceUnavailable, "store_unavailable", err.Error(), time.Second)
	}
	return nil
}

func (a *adminAPI) route(w http.ResponseWriter, r *http.Request) error {
	if a.app == nil {
		return fail(http.StatusNotFound, "no_hookgate", "no hookgate app is running: no handler or destination of the running config uses it")
	}
	// What the gateway remembers: keys and entities are the rest of the
	// path, unescaped (they may hold any character).
	rest := strings.TrimPrefix(r.URL.EscapedPath(), "/hookgate/")
	for _, kind := range []string{"dedupe/", "freshness/"} {
		if esc, ok := strings.CutPrefix(rest, kind); ok {
			key, err := url.PathUnescape(esc)
			if err != nil || key == "" {
				return fail(http.StatusBadRequest, "bad_request", "a %s needs a key", strings.TrimSuffix(kind, "/"))
			}
			return a.remembered(w, r, strings.TrimSuffix(kind, "/"), key)
		}
	}
	if a.app.sender == nil {
		return fail(http.StatusNotFound, "no_sender", "no sender is running: configure a destination in the hookgate global option")
	}
	// Split the escaped path, then unescape each segment: an ID may hold
	// a slash.
	parts := strings.Split(strings.Trim(rest, "/"), "/")
	for i, p := range parts {
		if u, err := url.PathUnescape(p); err == nil {
			parts[i] = u
		}
	}
	method := r.Method
	switch {
	case parts[0] == "destinations" && len(parts) == 1 && method == http.MethodGet:
		return a.listDestinations(w, r)
	case parts[0] == "destinations" && len(parts) == 3 && method == http.MethodPost:
		return a.destinationAction(w, r, parts[1], parts[2])
	case parts[0] == "dlq" && len(parts) == 1 && method == http.MethodGet:
		return a.listDead(w, r)
	case parts[0] == "dlq" && len(parts) == 2 && parts[1] == "summary" && method == http.MethodGet:
		return a.summary(w, r)
	case parts[0] == "dlq" && len(parts) == 2 && parts[1] == "redrive" && method == http.MethodPost:
		return a.redrive(w, r)
	case parts[0] == "dlq" && len(parts) == 2 && parts[1] == "purge" && method == http.MethodPost:
		return a.purge(w, r)
	case parts[0] == "dlq" && len(parts) == 2 && method == http.MethodGet:
		return a.showDead(w, r, parts[1])
	case parts[0] == "dlq" && len(parts) == 2 && method == http.MethodDelete:
		return a.deleteDead(w, r, parts[1])
	case parts[0] == "redrives" && len(parts) == 2 && method == http.MethodGet:
		return a.progress(w, r, parts[1])
	}
	return fail(http.StatusNotFound, "not_found", "no such endpoint: %s %s", method, r.URL.Path)
}

// writeJSON answers v as JSON. Payloads and errors go out as they are
// (no \u003c for "<"): the API is not HTML, and a payload is shown byte
// for byte.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
	return nil
}

func (a *adminAPI) listDestinations(w http.ResponseWriter, r *http.Request) error {
	out, err := a.app.ops().Destinations(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"destinations": out})
}

func (a *adminAPI) destinationAction(w http.ResponseWriter, r *http.Request, name, action string) error {
	switch action {
	case "move":
		var in struct {
			To string `json:"to"`
		}
		if err := decodeBody(r, &in); err != nil {
			return err
		}
		if in.To == "" {
			return fail(http.StatusBadRequest, "bad_request", "to is required: the configured destination to move the envelopes to")
		}
		moved, kept, err := a.app.ops().MoveOrphan(r.Context(), name, in.To, "admin api from "+r.RemoteAddr)
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, map[string]int{"moved": moved, "kept": kept})
	case "purge":
		n, err := a.app.ops().PurgeOrphan(r.Context(), name, "admin api from "+r.RemoteAddr)
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, map[string]int{"removed": n})
	}
	if !a.app.hasDestination(name) {
		return fail(http.StatusNotFound, "unknown_destination", "no destination %q", name)
	}
	switch action {
	case "pause", "resume":
		v, err := a.app.ops().SetPaused(r.Context(), name, action == "pause", "admin api from "+r.RemoteAddr)
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, v)
	case "enqueue":
		var in struct {
			ID        json.RawMessage `json:"id"` // a string: not stringified
			EventType string          `json:"event_type"`
			Entity    string          `json:"entity"`
			EventTime string          `json:"event_time"`
			Payload   json.RawMessage `json:"payload"`
		}
		if err := decodeBody(r, &in); err != nil {
			return err
		}
		var id string
		if len(in.ID) > 0 {
			if v := gjson.ParseBytes(in.ID); v.Type != gjson.String {
				return fail(http.StatusBadRequest, "bad_id", "id must be a string, not %s", jsonKind(v))
			}
			if err := json.Unmarshal(in.ID, &id); err != nil {
				return fail(http.StatusBadRequest, "bad_id", "id: %v", err)
			}
		}
		if id == "" {
			return fail(http.StatusBadRequest, "missing_idempotency_key", "id is required")
		}
		if err := sender.CheckID(id); err != nil {
			return fail(http.StatusBadRequest, "bad_id", "id: %v", err)
		}
		if len(in.Payload) == 0 {
			return fail(http.StatusBadRequest, "bad_request", "payload is required")
		}
		// The payload is JSON: the decoder checked it.
		e := &sender.Envelope{ID: id, Destination: name, EventType: in.EventType, Entity: in.Entity,
			Payload: in.Payload, ContentType: "application/json"}
		if in.EventTime != "" {
			t, err := parseEventTime(in.EventTime)
			if err != nil {
				return fail(http.StatusBadRequest, "malformed_event_time", "%v", err)
			}
			e.EventTime = t
		}
		writeEnqueued(w, a.app, r, e, a.logger)
		return nil
	}
	return fail(http.StatusNotFound, "not_found", "no such action %q: pause, resume, enqueue, move or purge", action)
}

// maxAdminBody bounds an admin request's body.
const maxAdminBody = 2 << 20

func decodeBody(r *http.Request, v any) error {
	d := json.NewDecoder(io.LimitReader(r.Body, maxAdminBody))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fail(http.StatusBadRequest, "bad_request", "request body: %v", err)
	}
	return nil
}

// filterOf reads a filter from query parameters.
func filterOf(q map[string][]string) (sender.Filter, error) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	f := sender.Filter{Destination: get("destination"), Class: get("class"), IDs: q["id"]}
	var err error
	if f.Since, err = parseTimeParam("since", get("since")); err != nil {
		return f, err
	}
	f.Until, err = parseTimeParam("until", get("until"))
	return f, err
}

func parseTimeParam(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return t, fail(http.StatusBadRequest, "bad_request", "%s: want RFC 3339, got %q", name, v)
	}
	return t, nil
}

// deadEntry is a dead letter in a list.
type deadEntry struct {
	ID          string    `json:"id"`
	Destination string    `json:"destination"`
	EventType   string    `json:"event_type"`
	Class       string    `json:"class"`
	LastStatus  int       `json:"last_status"`
	LastError   string    `json:"last_error"`
	Attempts    int       `json:"attempts"`
	DeadAt      time.Time `json:"dead_at"`
}

func entryOf(e *sender.Meta) deadEntry {
	return deadEntry{ID: e.ID, Destination: e.Destination, EventType: e.EventType, Class: e.Class.String(),
		LastStatus: e.LastStatus, LastError: e.LastError, Attempts: e.Tried, DeadAt: e.DeadAt}
}

func (a *adminAPI) listDead(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f, err := filterOf(q)
	if err != nil {
		return err
	}
	limit := 50
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit <= 0 || limit > 1000 {
			return fail(http.StatusBadRequest, "bad_request", "limit: want 1 to 1000")
		}
	}
	page, next, err := a.app.ops().List(r.Context(), f, limit, q.Get("cursor"))
	if err != nil {
		return err
	}
	entries := make([]deadEntry, 0, len(page))
	for _, e := range page {
		entries = append(entries, entryOf(e))
	}
	return writeJSON(w, http.StatusOK, map[string]any{"entries": entries, "next_cursor": next})
}

func (a *adminAPI) summary(w http.ResponseWriter, r *http.Request) error {
	f, err := filterOf(r.URL.Query())
	if err != nil {
		return err
	}
	groups, total, _, err := a.app.ops().Summary(r.Context(), f, 0)
	if err != nil {
		return err
	}
	if groups == nil {
		groups = []sender.Group{}
	}
	return writeJSON(w, http.StatusOK, map[string]any{"groups": groups, "total": total})
}

// attemptView is one attempt in an envelope's detail.
type attemptView struct {
	At        time.Time `json:"at"`
	Status    int       `json:"status"`
	Error     string    `json:"error"`
	LatencyMs float64   `json:"latency_ms"`
	RedriveID string    `json:"redrive_id,omitempty"`
}

func (a *adminAPI) showDead(w http.ResponseWriter, r *http.Request, id string) error {
	e, state, err := a.app.ops().Get(r.Context(), r.URL.Query().Get("destination"), id)
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
	return writeJSON(w, http.StatusOK, map[string]any{
		"id": e.ID, "destination": e.Destination, "state": state, "event_type": e.EventType, "entity": e.Entity,
		"event_time": zeroNil(e.EventTime), "created_at": e.CreatedAt, "payload": payload,
		"class": e.Class.String(), "last_status": e.LastStatus, "last_error": e.LastError,
		"attempts": len(e.Log), "redrive_id": e.RedriveID, "dead_at": zeroNil(e.DeadAt), "attempt_log": log,
	})
}

func zeroNil(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

func (a *adminAPI) deleteDead(w http.ResponseWriter, r *http.Request, id string) error {
	f := sender.Filter{Destination: r.URL.Query().Get("destination"), IDs: []string{id}}
	n, err := a.app.ops().Purge(r.Context(), f, "admin api from "+r.RemoteAddr)
	if err != nil {
		return err
	}
	if n == 0 {
		return fail(http.StatusNotFound, "not_found", "no dead letter %q", id)
	}
	return writeJSON(w, http.StatusOK, map[string]int{"removed": n})
}

// redriveRequest is the body of a redrive or a purge.
type redriveRequest struct {
	Destination string   `json:"destination"`
	Class       string   `json:"class"`
	Since       string   `json:"since"`
	Until       string   `json:"until"`
	IDs         []string `json:"ids"`
	Limit       int      `json:"limit"`
	DryRun      bool     `json:"dry_run"`
	By          string   `json:"by"`
}

func (in redriveRequest) filter() (sender.Filter, error) {
	f := sender.Filter{Destination: in.Destination, Class: in.Class, IDs: in.IDs}
	var err error
	if f.Since, err = parseTimeParam("since", in.Since); err != nil {
		return f, err
	}
	f.Until, err = parseTimeParam("until", in.Until)
	return f, err
}

func (a *adminAPI) redrive(w http.ResponseWriter, r *http.Request) error {
	var in redriveRequest
	if err := decodeBody(r, &in); err != nil {
		return err
	}
	f, err := in.filter()
	if err != nil {
		return err
	}
	by := in.By
	if by == "" {
		by = "admin api from " + r.RemoteAddr
	}
	rd, err := a.app.ops().Redrive(r.Context(), f, in.Limit, by, in.DryRun)
	if rd != nil && !in.DryRun {
		// by is the caller's claim: the admin endpoint knows no identity.
		a.logger.Info("redrive through the admin API", zap.String("redrive_id", rd.ID),
			zap.String("claimed_by", in.By), zap.String("remote_addr", r.RemoteAddr))
	}
	if err != nil && rd != nil && rd.ID != "" {
		return fail(http.StatusServiceUnavailable, "store_unavailable",
			"redrive %s moved %d before the store failed (%v): see GET /hookgate/redrives/%s before redriving again", rd.ID, rd.Moved, err, rd.ID)
	}
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"redrive_id": rd.ID, "matched": rd.Matched, "moved": rd.Moved})
}

func (a *adminAPI) progress(w http.ResponseWriter, r *http.Request, id string) error {
	rd, err := a.app.ops().Progress(r.Context(), id, "")
	if errors.Is(err, sender.ErrNotFound) {
		return fail(http.StatusNotFound, "not_found", "no redrive %q", id)
	}
	if err != nil {
		return err
	}
	rd.Letters = nil
	return writeJSON(w, http.StatusOK, rd)
}

func (a *adminAPI) purge(w http.ResponseWriter, r *http.Request) error {
	var in redriveRequest
	if err := decodeBody(r, &in); err != nil {
		return err
	}
	f, err := in.filter()
	if err != nil {
		return err
	}
	n, err := a.app.ops().Purge(r.Context(), f, "admin api from "+r.RemoteAddr)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]int{"removed": n})
}

// remembered serves GET and DELETE /hookgate/dedupe/<key> and GET
// /hookgate/freshness/<entity>: what the gateway remembers of a delivery or
// an entity, and forgetting a delivery.
func (a *adminAPI) remembered(w http.ResponseWriter, r *http.Request, kind, key string) error {
	if !a.app.store.used {
		return fail(http.StatusNotFound, "no_store", "no handler of this config uses the store")
	}
	if _, err := a.app.store.get(); err != nil {
		return err
	}
	now := time.Now()
	switch {
	case kind == "dedupe" && r.Method == http.MethodGet:
		e, err := a.app.store.Get(r.Context(), key, now)
		if err != nil {
			return err
		}
		out := map[string]any{"key": key, "state": "absent"}
		switch e.State {
		case dedupe.StateClaimed:
			out["state"], out["lease_until"] = "claimed", e.LeaseUntil
		case dedupe.StateRecorded:
			out["state"], out["status"], out["body_omitted"] = "recorded", e.Record.Status, e.Record.BodyOmitted
			out["body_bytes"] = len(e.Record.Body)
		}
		if e.State != dedupe.Absent {
			out["fingerprint"], out["expires_at"] = e.Fingerprint.String(), e.Expires
		}
		return writeJSON(w, http.StatusOK, out)
	case kind == "dedupe" && r.Method == http.MethodDelete:
		found, err := a.app.store.Forget(r.Context(), key)
		if err != nil {
			return err
		}
		for _, d := range a.app.dedupers {
			d.Uncache(key)
		}
		if !found {
			return fail(http.StatusNotFound, "not_found", "the store holds nothing for this key")
		}
		a.logger.Warn("dedupe record forgotten: the next copy of this delivery is forwarded as new",
			zap.String("key", key), zap.String("by", r.RemoteAddr))
		return writeJSON(w, http.StatusOK, map[string]any{"key": key, "forgotten": true})
	case kind == "freshness" && r.Method == http.MethodGet:
		out := map[string]any{"entity": key}
		for _, by := range []struct{ prefix, name string }{{"t:", "event_time"}, {"s:", "sequence"}} {
			st, err := a.app.store.GetEntity(r.Context(), by.prefix+key, now)
			if err != nil {
				return err
			}
			v := map[string]any{"watermark": nil, "lease_until": nil}
			if st.HasWatermark {
				v["watermark"], v["expires_at"] = st.Watermark, st.WatermarkExpires
				if by.prefix == "t:" {
					v["watermark"] = time.UnixMicro(st.Watermark).UTC()
				}
			}
			if !st.LeaseUntil.IsZero() {
				v["lease_until"] = st.LeaseUntil
			}
			out[by.name] = v
		}
		return writeJSON(w, http.StatusOK, out)
	}
	return fail(http.StatusMethodNotAllowed, "method_not_allowed", "%s is not allowed here", r.Method)
}

// Interface guards
var (
	_ caddy.AdminRouter = (*adminAPI)(nil)
	_ caddy.Provisioner = (*adminAPI)(nil)
)
