// Package httpapi is the admin API's JSON handlers over sender.Ops: the
// sender's destinations, events, dead letters and delivery history, under
// /hookgate/. JSON
// in and out; every error is problem+json (RFC 9457) with a reason code.
// WriteEnqueued and WritePublished answer for webhook_enqueue too.
//
// The package imports no Caddy: the admin.api.hookgate module finds the
// running app and mounts a Handler on Caddy's admin endpoint. The
// `hookgate dlq`, `deliveries` and `destinations` commands speak to it, with the types
// it answers with.
package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/sender"
)

// Handler serves the sender's routes of the admin API. Mount it at
// /hookgate/: it reads the whole path.
type Handler struct {
	ops    *sender.Ops
	logger *slog.Logger
}

// New returns the handler over ops; a nil ops (no sender runs) answers
// every route 404 no_sender. A nil logger logs nothing.
func New(ops *sender.Ops, logger *slog.Logger) *Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Handler{ops: ops, logger: logger}
}

// ServeHTTP routes the request and answers its error, if any, as
// problem+json (see WriteError).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := h.route(w, r); err != nil {
		WriteError(w, r, err, h.logger)
	}
}

// Error is an admin API failure, answered as problem+json with its status
// and reason code.
type Error struct {
	Status int
	Reason string
	Err    error
}

func (e Error) Error() string { return e.Err.Error() }

// Errorf returns an Error whose detail is formatted as fmt.Errorf does.
func Errorf(status int, reason string, format string, args ...any) error {
	return Error{Status: status, Reason: reason, Err: fmt.Errorf(format, args...)}
}

// WriteError answers err as problem+json: an Error as it says, the
// sender's sentinel errors by their meaning (bad_limit, bad_request,
// destination_configured, destination_orphaned, unknown_destination,
// not_found), and anything else, a store failure, as 503
// store_unavailable with Retry-After, logged.
func WriteError(w http.ResponseWriter, r *http.Request, err error, logger *slog.Logger) {
	var ae Error
	switch {
	case errors.As(err, &ae):
		problem.Write(w, ae.Status, ae.Reason, ae.Err.Error(), 0)
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
		logger.Error("admin request failed", "path", r.URL.Path, "error", err)
		problem.Write(w, http.StatusServiceUnavailable, "store_unavailable", err.Error(), time.Second)
	}
}

// WriteJSON answers v as JSON. Payloads and errors go out as they are
// (no \u003c for "<"): the API is not HTML, and a payload is shown byte
// for byte.
func WriteJSON(w http.ResponseWriter, status int, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes()) // a client gone away has nothing to be told
	return nil
}

func (h *Handler) route(w http.ResponseWriter, r *http.Request) error {
	if h.ops == nil {
		return Errorf(http.StatusNotFound, "no_sender", "no sender is running: configure a destination in the hookgate global option")
	}
	// Split the escaped path, then unescape each segment: an ID may hold
	// a slash.
	rest := strings.TrimPrefix(r.URL.EscapedPath(), "/hookgate/")
	parts := strings.Split(strings.Trim(rest, "/"), "/")
	for i, p := range parts {
		if u, err := url.PathUnescape(p); err == nil {
			parts[i] = u
		}
	}
	method := r.Method
	switch {
	case parts[0] == "destinations" && len(parts) == 1 && method == http.MethodGet:
		return h.listDestinations(w, r)
	case parts[0] == "destinations" && len(parts) == 3 && method == http.MethodPost:
		return h.destinationAction(w, r, parts[1], parts[2])
	case parts[0] == "events" && len(parts) == 1 && method == http.MethodPost:
		ev, err := eventOf(r)
		if err != nil {
			return err
		}
		WritePublished(w, r, h.ops.Publish, ev, h.logger)
		return nil
	case parts[0] == "dlq" && len(parts) == 1 && method == http.MethodGet:
		return h.listDead(w, r)
	case parts[0] == "dlq" && len(parts) == 2 && parts[1] == "summary" && method == http.MethodGet:
		return h.summary(w, r)
	case parts[0] == "dlq" && len(parts) == 2 && parts[1] == "redrive" && method == http.MethodPost:
		return h.redrive(w, r)
	case parts[0] == "dlq" && len(parts) == 2 && parts[1] == "purge" && method == http.MethodPost:
		return h.purge(w, r)
	case parts[0] == "dlq" && len(parts) == 2 && method == http.MethodGet:
		return h.showDead(w, r, parts[1])
	case parts[0] == "dlq" && len(parts) == 2 && method == http.MethodDelete:
		return h.deleteDead(w, r, parts[1])
	case parts[0] == "deliveries" && len(parts) == 1 && method == http.MethodGet:
		return h.listDeliveries(w, r)
	case parts[0] == "deliveries" && len(parts) == 2 && parts[1] == "resend" && method == http.MethodPost:
		return h.resend(w, r)
	case parts[0] == "deliveries" && len(parts) >= 3 && method == http.MethodGet:
		return h.showDelivery(w, r, parts[1], strings.Join(parts[2:], "/"))
	case parts[0] == "redrives" && len(parts) == 2 && method == http.MethodGet:
		return h.progress(w, r, parts[1])
	}
	return Errorf(http.StatusNotFound, "not_found", "no such endpoint: %s %s", method, r.URL.Path)
}

// maxBody bounds a request's body.
const maxBody = 2 << 20

// decodeBody reads a JSON body into v; an unknown field is refused.
func decodeBody(r *http.Request, v any) error {
	d := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return Errorf(http.StatusBadRequest, "bad_request", "request body: %v", err)
	}
	return nil
}

// by names who asked, for the log and the audit record: the admin
// endpoint knows no identity, only the caller's address.
func by(r *http.Request) string { return "admin api from " + r.RemoteAddr }
