// Package httpapi is the admin API's JSON handlers over sender.Ops: the
// sender's destinations, events, dead letters and delivery history, under
// /hookgate/. JSON
// in and out; every error is problem+json (RFC 9457) with a reason code.
// An event enqueued or published comes in through package intake, as
// webhook_enqueue's do: this package routes to it.
//
// The package imports no Caddy: the hookgate app registers a Handler's
// routes on its admin router (package route) at Start, and the
// admin.api.hookgate module serves the running app's router on Caddy's
// admin endpoint. The
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
	"strings"
	"time"

	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/internal/route"
	"github.com/hookgate/hookgate/portal"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/destinations"
)

// Handler serves the sender's routes of the admin API, under /hookgate/.
type Handler struct {
	ops    *sender.Ops
	reg    *destinations.Registry // the API's destinations; nil: none can be made
	links  *portal.Links          // portal links; nil: no portal_key
	logger *slog.Logger
	mux    route.Mux
}

// New returns the handler over ops, reg (the destinations made through
// the API) and links (the portal's; nil: 404 no_portal), its routes
// registered once; a nil ops (no sender runs) answers every request 404
// no_sender. A nil logger logs nothing.
func New(ops *sender.Ops, reg *destinations.Registry, links *portal.Links, logger *slog.Logger) *Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	h := &Handler{ops: ops, reg: reg, links: links, logger: logger}
	h.Register(&h.mux)
	h.mux.NotFound = h.NotFound
	return h
}

// ServeHTTP serves the request, as problem+json when no route takes it:
// 404 not_found, or 405 method_not_allowed with Allow.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mux.ServeHTTP(w, r)
}

// Register registers the routes Endpoints lists on mux. Each answers its
// error, if any, as problem+json (see WriteError).
func (h *Handler) Register(mux *route.Mux) {
	for _, e := range endpoints {
		names := wildcards(e.pattern)
		mux.HandleFunc(e.pattern, func(w http.ResponseWriter, r *http.Request) {
			args := make([]string, len(names))
			for i, n := range names {
				args[i] = route.Value(r, n)
			}
			if err := h.serve(e, w, r, args); err != nil {
				WriteError(w, r, err, h.logger)
			}
		})
	}
}

// NotFound answers a request no route takes: 404 not_found, or no_sender
// when no sender runs.
func (h *Handler) NotFound(w http.ResponseWriter, r *http.Request) {
	err := Errorf(problem.NotFound, "no such endpoint: %s %s", problem.Truncate(r.Method, 40), problem.Truncate(r.URL.Path, 200))
	if h.ops == nil {
		err = errNoSender
	}
	WriteError(w, r, err, h.logger)
}

// errNoSender answers every route when no sender runs.
var errNoSender = Errorf(problem.NoSender, "no sender is running: configure a destination in the hookgate global option")

func (h *Handler) serve(e endpoint, w http.ResponseWriter, r *http.Request, args []string) error {
	if h.ops == nil {
		return errNoSender
	}
	for _, a := range args {
		if a == "" {
			// A {name...} wildcard takes an empty rest: no ID, no route.
			return Errorf(problem.NotFound, "no such endpoint: %s %s", r.Method, problem.Truncate(r.URL.Path, 200))
		}
	}
	return e.serve(h, w, r, args)
}

// Error is an admin API failure, answered as problem+json with its status
// and reason code.
type Error struct {
	Reason problem.Reason
	Err    error
}

func (e Error) Error() string { return e.Err.Error() }

// Errorf returns an Error whose detail is formatted as fmt.Errorf does.
func Errorf(reason problem.Reason, format string, args ...any) error {
	return Error{Reason: reason, Err: fmt.Errorf(format, args...)}
}

// WriteError answers err as problem+json: an Error as it says, the
// sender's sentinel errors by their meaning (bad_limit, bad_request,
// filter_required, destination_configured, destination_orphaned, unknown_destination,
// not_found), and anything else, a store failure, as 503
// store_unavailable with Retry-After, logged.
func WriteError(w http.ResponseWriter, r *http.Request, err error, logger *slog.Logger) {
	var ae Error
	switch {
	case errors.As(err, &ae):
		problem.Write(w, ae.Reason, ae.Err.Error(), 0)
	case errors.As(err, new(destinations.InvalidError)):
		problem.Write(w, problem.BadRequest, err.Error(), 0)
	case errors.As(err, new(destinations.NotAllowedError)):
		problem.Write(w, problem.DestinationNotAllowed, err.Error(), 0)
	case errors.Is(err, destinations.ErrExists):
		problem.Write(w, problem.DestinationExists, err.Error(), 0)
	case errors.Is(err, destinations.ErrStatic):
		problem.Write(w, problem.DestinationStatic, err.Error(), 0)
	case errors.Is(err, destinations.ErrNotFound):
		problem.Write(w, problem.UnknownDestination, err.Error(), 0)
	case errors.Is(err, destinations.ErrUnreadable):
		problem.Write(w, problem.DestinationUnreadable, err.Error(), 0)
	case errors.Is(err, destinations.ErrChanged):
		problem.Write(w, problem.DestinationChanged, err.Error(), 0)
	case errors.Is(err, sender.ErrBadLimit):
		problem.Write(w, problem.BadLimit, err.Error(), 0)
	case errors.Is(err, sender.ErrBadFilter):
		problem.Write(w, problem.BadRequest, err.Error(), 0)
	case errors.Is(err, sender.ErrNoFilter):
		problem.Write(w, problem.FilterRequired, err.Error(), 0)
	case errors.Is(err, sender.ErrConfigured):
		problem.Write(w, problem.DestinationConfigured, err.Error(), 0)
	case errors.Is(err, sender.ErrOrphaned):
		problem.Write(w, problem.DestinationOrphaned, err.Error(), 0)
	case errors.Is(err, sender.ErrUnknownDestination):
		problem.Write(w, problem.UnknownDestination, err.Error(), 0)
	case errors.Is(err, sender.ErrNotFound):
		problem.Write(w, problem.NotFound, err.Error(), 0)
	default:
		logger.Error("admin request failed", "path", r.URL.Path, "error", err)
		problem.Write(w, problem.StoreUnavailable, err.Error(), time.Second)
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

// Endpoints returns the routes Handler serves, in net/http's pattern
// syntax ("GET /hookgate/dlq/{id}"; a final {name...} is the rest of the
// path).
func Endpoints() []string {
	out := make([]string, len(endpoints))
	for i, e := range endpoints {
		out[i] = e.pattern
	}
	return out
}

// endpoint is a route and what serves it; args are the pattern's
// wildcards, unescaped (route.Value), in order.
type endpoint struct {
	pattern string
	serve   serveFunc
}

type serveFunc func(h *Handler, w http.ResponseWriter, r *http.Request, args []string) error

// endpoints are the sender's routes, ServeMux patterns: the most specific
// that matches serves (dlq/summary before dlq/{id}). A new route goes here and into docs/admin-api.yaml, which
// integration/openapi_test.go holds to this list.
var endpoints = []endpoint{
	{"GET /hookgate/destinations", plain((*Handler).listDestinations)},
	{"POST /hookgate/destinations", plain((*Handler).createDestination)},
	{"GET /hookgate/destinations/{name}", oneArg((*Handler).showDestination)},
	{"PATCH /hookgate/destinations/{name}", oneArg((*Handler).updateDestination)},
	{"DELETE /hookgate/destinations/{name}", oneArg((*Handler).deleteDestination)},
	{"POST /hookgate/destinations/{name}/rotate", oneArg((*Handler).rotateDestination)},
	{"POST /hookgate/destinations/{name}/pause", action("pause")},
	{"POST /hookgate/destinations/{name}/resume", action("resume")},
	{"POST /hookgate/destinations/{name}/enable", action("enable")},
	{"POST /hookgate/destinations/{name}/enqueue", action("enqueue")},
	{"POST /hookgate/destinations/{name}/move", action("move")},
	{"POST /hookgate/destinations/{name}/purge", action("purge")},
	{"POST /hookgate/events", plain((*Handler).publish)},
	{"GET /hookgate/dlq", plain((*Handler).listDead)},
	{"GET /hookgate/dlq/summary", plain((*Handler).summary)},
	{"POST /hookgate/dlq/redrive", plain((*Handler).redrive)},
	{"POST /hookgate/dlq/purge", plain((*Handler).purge)},
	{"GET /hookgate/dlq/{id}", oneArg((*Handler).showDead)},
	{"DELETE /hookgate/dlq/{id}", oneArg((*Handler).deleteDead)},
	{"GET /hookgate/deliveries", plain((*Handler).listDeliveries)},
	{"POST /hookgate/deliveries/resend", plain((*Handler).resend)},
	{"GET /hookgate/deliveries/{destination}/{id...}", func(h *Handler, w http.ResponseWriter, r *http.Request, args []string) error {
		return h.showDelivery(w, r, args[0], args[1])
	}},
	{"GET /hookgate/redrives/{redrive_id}", oneArg((*Handler).progress)},
	{"POST /hookgate/portal-links", plain((*Handler).issuePortalLink)},
	{"POST /hookgate/portal-links/revoke", plain((*Handler).revokePortalLinks)},
}

// plain serves a route without wildcards.
func plain(f func(*Handler, http.ResponseWriter, *http.Request) error) serveFunc {
	return func(h *Handler, w http.ResponseWriter, r *http.Request, _ []string) error { return f(h, w, r) }
}

// oneArg serves a route with one wildcard.
func oneArg(f func(*Handler, http.ResponseWriter, *http.Request, string) error) serveFunc {
	return func(h *Handler, w http.ResponseWriter, r *http.Request, args []string) error {
		return f(h, w, r, args[0])
	}
}

// action serves POST /hookgate/destinations/{name}/<name>.
func action(name string) serveFunc {
	return func(h *Handler, w http.ResponseWriter, r *http.Request, args []string) error {
		return h.destinationAction(w, r, args[0], name)
	}
}

// wildcards are the names of pattern's wildcards, in order.
func wildcards(pattern string) []string {
	var names []string
	for _, seg := range strings.Split(pattern, "/") {
		if name, ok := strings.CutPrefix(seg, "{"); ok {
			names = append(names, strings.TrimSuffix(strings.TrimSuffix(name, "}"), "..."))
		}
	}
	return names
}

// maxBody bounds a request's body.
const maxBody = 2 << 20

// decodeBody reads a JSON body into v; an unknown field is refused.
func decodeBody(r *http.Request, v any) error {
	d := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return Errorf(problem.BadRequest, "request body: %v", err)
	}
	return nil
}

// by names who asked, for the log and the audit record: the admin
// endpoint knows no identity, only the caller's address.
func by(r *http.Request) string { return "admin api from " + r.RemoteAddr }
