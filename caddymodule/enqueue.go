package caddymodule

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
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
)

func init() {
	caddy.RegisterModule(Enqueue{})
	httpcaddyfile.RegisterHandlerDirective("webhook_enqueue", parseEnqueue)
	// A terminal handler: it answers, like respond.
	httpcaddyfile.RegisterDirectiveOrder("webhook_enqueue", httpcaddyfile.Before, "respond")
}

// Enqueue is the webhook_enqueue handler: it queues the request's body as
// an event for one of the sender's destinations, and answers 202 with the
// envelope's state. The same delivery ID enqueued twice is one envelope.
type Enqueue struct {
	// Destination is a destination of the hookgate app. Required.
	Destination string `json:"destination"`

	// ID is the delivery ID, a placeholder. Default: the Idempotency-Key
	// header, else the body's "id".
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
	if h.MaxBody == 0 {
		h.MaxBody = DefaultMaxBody
	}
	if h.MaxBody < 0 {
		return errors.New("max_body must be positive")
	}
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

// enqueueAnswer is webhook_enqueue's 202 body.
type enqueueAnswer struct {
	ID          string `json:"id"`
	Destination string `json:"destination"`
	State       string `json:"state"`
	Duplicate   bool   `json:"duplicate"`
}

// ServeHTTP queues the event.
func (h *Enqueue) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	r, body, err := bufferBody(r, h.MaxBody)
	if err != nil {
		reason, status := bodyRejection(err)
		problem.Write(w, status, reason, err.Error(), 0)
		return nil
	}
	repl := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	id, err := h.deliveryID(repl, r, body)
	if err != nil {
		problem.Write(w, http.StatusBadRequest, err.Error(), "a delivery ID is required: an Idempotency-Key header, the body's \"id\", or the id placeholder", 0)
		return nil
	}
	e := &sender.Envelope{ID: id, Destination: h.Destination, Payload: body}
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
			if e.EventTime, err = parseEventTime(raw); err != nil {
				problem.Write(w, http.StatusBadRequest, "malformed_event_time", err.Error(), 0)
				return nil
			}
		}
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(r.Context(), carrier)
	e.TraceParent, e.TraceState = carrier["traceparent"], carrier["tracestate"]
	writeEnqueued(w, h.app, r, e, h.logger)
	return nil
}

// writeEnqueued enqueues e through the app and answers as webhook_enqueue
// does; the admin API's enqueue answers the same way.
func writeEnqueued(w http.ResponseWriter, app *App, r *http.Request, e *sender.Envelope, logger *zap.Logger) {
	res, err := app.Enqueue(r.Context(), e)
	switch {
	case err != nil:
		logger.Error("enqueue failed", zap.String("destination", e.Destination), zap.String("id", e.ID), zap.Error(err))
		problem.Write(w, http.StatusServiceUnavailable, "store_unavailable", "the queue is unavailable; nothing was enqueued", time.Second)
		return
	case res.Mismatch:
		problem.Write(w, http.StatusUnprocessableEntity, "key_reused_with_different_payload", "this delivery ID was enqueued with another payload", 0)
		return
	}
	b, _ := json.Marshal(enqueueAnswer{ID: e.ID, Destination: e.Destination, State: string(res.State), Duplicate: res.Duplicate})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(http.StatusAccepted)
	w.Write(append(b, '\n'))
}

// deliveryID resolves the delivery ID: the id placeholder when set,
// else the Idempotency-Key header, else the body's "id". The error is the
// reason code.
func (h *Enqueue) deliveryID(repl *caddy.Replacer, r *http.Request, body []byte) (string, error) {
	var id string
	switch {
	case h.ID != "":
		id, _ = repl.ReplaceOrErr(h.ID, true, true)
	case r.Header.Get("Idempotency-Key") != "":
		id = r.Header.Get("Idempotency-Key")
	default:
		id = gjson.GetBytes(body, "id").String()
	}
	switch {
	case id == "":
		return "", errors.New("missing_idempotency_key")
	case len(id) > dedupe.MaxKeyLen:
		return "", errors.New("idempotency_key_too_long")
	}
	return id, nil
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
