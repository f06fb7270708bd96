package caddymodule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/gjson"
	"go.opentelemetry.io/otel/propagation"
	"go.uber.org/zap"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/httpapi"
)

func init() {
	caddy.RegisterModule(Enqueue{})
	httpcaddyfile.RegisterHandlerDirective("webhook_enqueue", parseEnqueue)
	// A terminal handler: it answers, like respond.
	httpcaddyfile.RegisterDirectiveOrder("webhook_enqueue", httpcaddyfile.Before, "respond")
}

// Enqueue is the webhook_enqueue handler: it queues the request's body as
// an event for one of the sender's destinations, with its Content-Type,
// and answers 202 with the envelope's state. The same delivery ID
// enqueued twice is one envelope.
type Enqueue struct {
	// Destination is a destination of the hookgate app. Required.
	Destination string `json:"destination"`

	// ID is the delivery ID, a placeholder. Default: the Idempotency-Key
	// header, else the body's "id" (a JSON string). A delivery ID is 1 to
	// 1024 bytes of visible ASCII, else 400 bad_id.
	ID string `json:"id,omitempty"`

	// EventType, Entity and EventTime describe the event (optional
	// placeholders, e.g. {webhook.json.type}); the event time is RFC 3339
	// or unix seconds.
	EventType string `json:"event_type,omitempty"`
	Entity    string `json:"entity,omitempty"`
	EventTime string `json:"event_time,omitempty"`

	// MaxBody is the largest body accepted, in bytes. Default 1 MiB.
	MaxBody int64 `json:"max_body,omitempty"`

	app    *App
	now    func() time.Time
	logger *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (Enqueue) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.webhook_enqueue",
		New: func() caddy.Module { return new(Enqueue) },
	}
}

// Provision sets up the handler.
func (h *Enqueue) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	maxBody, err := provisionMaxBody(h.MaxBody)
	if err != nil {
		return err
	}
	h.MaxBody = maxBody
	if h.now == nil {
		h.now = time.Now
	}
	app, err := appFrom(ctx)
	if err != nil {
		return err
	}
	if !app.hasDestination(h.Destination) {
		return fmt.Errorf("webhook_enqueue: destination %q is not configured in the hookgate global option", h.Destination)
	}
	h.app = app
	return nil
}

// ServeHTTP queues the event. It answers 405 to any method but POST, 400
// to an empty body, to a body that must be JSON and is not (see
// mustBeJSON), and to a missing or bad delivery ID, and enqueues nothing
// then.
func (h *Enqueue) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		problem.Write(w, http.StatusMethodNotAllowed, reasonMethodNotAllowed, "webhook_enqueue takes POST, not "+problem.Truncate(r.Method, 40), 0)
		return nil
	}
	r, body, err := bufferBody(r, h.MaxBody)
	if err != nil {
		writeBodyRejection(w, err)
		return nil
	}
	if len(body) == 0 {
		problem.Write(w, http.StatusBadRequest, reasonEmptyPayload, "the body is empty: it is the event's payload", 0)
		return nil
	}
	contentType := r.Header.Get("Content-Type")
	if contentType == "" {
		contentType = "application/json"
	}
	if h.mustBeJSON(r, contentType) && !json.Valid(body) {
		problem.Write(w, http.StatusBadRequest, reasonMalformedJSON, "the body is not valid JSON (its Content-Type is "+problem.Truncate(contentType, 80)+", or the delivery ID is read from it)", 0)
		return nil
	}
	repl := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	id, reason, detail := h.deliveryID(repl, r, body)
	if reason != "" {
		problem.Write(w, http.StatusBadRequest, reason, detail, 0)
		return nil
	}
	e := &sender.Envelope{ID: id, Destination: h.Destination, Payload: body, ContentType: contentType}
	for _, f := range []struct {
		tmpl string
		dst  *string
	}{{h.EventType, &e.EventType}, {h.Entity, &e.Entity}} {
		if f.tmpl != "" {
			*f.dst = repl.ReplaceKnown(f.tmpl, "")
		}
	}
	if h.EventTime != "" {
		if raw := repl.ReplaceKnown(h.EventTime, ""); raw != "" {
			if e.EventTime, err = dedupe.ParseEventTime(raw); err != nil {
				problem.Write(w, http.StatusBadRequest, reasonMalformedEventTime, err.Error(), 0)
				return nil
			}
		}
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(r.Context(), carrier)
	e.TraceParent, e.TraceState = carrier["traceparent"], carrier["tracestate"]
	httpapi.WriteEnqueued(w, r, h.app.Enqueue, e, zapslogLogger(h.logger))
	return nil
}

// Enqueue queues an event for delivery: the Go API for producers in the
// same process. It is idempotent by e.ID within e.Destination. An ID that
// is not 1 to 1024 bytes of visible ASCII is refused with an error that
// wraps sender.ErrBadID. An error otherwise leaves the outcome unknown
// (the store may have applied it): retry with the same ID.
func (a *App) Enqueue(ctx context.Context, e *sender.Envelope) (sender.EnqueueResult, error) {
	if err := sender.CheckID(e.ID); err != nil {
		return sender.EnqueueResult{}, err
	}
	if a.sender == nil {
		return sender.EnqueueResult{}, errors.New("the sender is not running")
	}
	return a.sender.Enqueue(ctx, e)
}

// mustBeJSON reports whether the body must be valid JSON: it is sent as
// JSON (application/json, application/*+json, or no Content-Type), or
// the delivery ID is read from it.
func (h *Enqueue) mustBeJSON(r *http.Request, contentType string) bool {
	fromBody := (h.ID == "" && r.Header.Get("Idempotency-Key") == "") || strings.Contains(h.ID, "{webhook.json.")
	return fromBody || isJSONType(contentType)
}

// isJSONType reports whether a Content-Type is JSON: application/json or
// application/*+json, parameters aside.
func isJSONType(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	return mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")
}

// deliveryID resolves the delivery ID: the id placeholder when set, else
// the Idempotency-Key header, else the body's "id", which must be a JSON
// string (a number is not made one). When there is no valid ID, reason is
// missing_idempotency_key or bad_id, and detail says why.
func (h *Enqueue) deliveryID(repl *caddy.Replacer, r *http.Request, body []byte) (id, reason, detail string) {
	switch {
	case h.ID != "":
		id, _ = repl.ReplaceOrErr(h.ID, true, true)
	case r.Header.Get("Idempotency-Key") != "":
		id = r.Header.Get("Idempotency-Key")
	default:
		v := gjson.GetBytes(body, "id")
		if v.Exists() && v.Type != gjson.String {
			return "", reasonBadID, "the body's \"id\" is " + httpapi.JSONKind(v) + ", not a string"
		}
		id = v.String()
	}
	if id == "" {
		return "", reasonMissingIdempotencyKey, "a delivery ID is required: an Idempotency-Key header, the body's \"id\", or the id placeholder"
	}
	if err := sender.CheckID(id); err != nil {
		return "", reasonBadID, err.Error()
	}
	return id, "", ""
}

func parseEnqueue(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	e := new(Enqueue)
	err := e.UnmarshalCaddyfile(h.Dispenser)
	return e, err
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	webhook_enqueue <destination> {
//		id         <placeholder>
//		event_type <placeholder>
//		entity     <placeholder>
//		event_time <placeholder>
//		max_body   <size>
//	}
func (h *Enqueue) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if !d.NextArg() {
		return d.Err("webhook_enqueue needs a destination")
	}
	h.Destination = d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	seen := map[string]bool{}
	for d.NextBlock(0) {
		sub := d.Val()
		if seen[sub] {
			return d.Errf("%s given twice", sub)
		}
		seen[sub] = true
		args := d.RemainingArgs()
		var err error
		switch sub {
		case "id":
			h.ID, err = oneArg(d, args)
		case "event_type":
			h.EventType, err = oneArg(d, args)
		case "entity":
			h.Entity, err = oneArg(d, args)
		case "event_time":
			h.EventTime, err = oneArg(d, args)
		case "max_body":
			var v string
			if v, err = oneArg(d, args); err == nil {
				if h.MaxBody, err = parseSize(v); err != nil {
					return d.Errf("max_body: %v", err)
				}
			}
		default:
			return d.Errf("unknown webhook_enqueue subdirective %q", sub)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Enqueue)(nil)
	_ caddyhttp.MiddlewareHandler = (*Enqueue)(nil)
	_ caddyfile.Unmarshaler       = (*Enqueue)(nil)
)
