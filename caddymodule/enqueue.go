package caddymodule

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/hookgate/hookgate/caddymodule/cfparse"
	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/internal/reqbody"
	"github.com/hookgate/hookgate/internal/zaplog"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/intake"
)

func init() {
	caddy.RegisterModule(Enqueue{})
	httpcaddyfile.RegisterHandlerDirective("webhook_enqueue", parseHandler[Enqueue])
	// A terminal handler: it answers, like respond.
	httpcaddyfile.RegisterDirectiveOrder("webhook_enqueue", httpcaddyfile.Before, "respond")
}

// Enqueue is the webhook_enqueue handler: it queues the request's body as
// an event for one of the sender's destinations, with its Content-Type
// and what its intake.Options keep of the request (durable ingress), and
// answers 202 with the envelope's state; without a destination, for
// every destination subscribed to the event's type (fan-out), and answers
// each one's. The same delivery ID enqueued twice is one envelope.
type Enqueue struct {
	// Destination is a destination of the hookgate app. Default none: the
	// event fans out by its type (EventType, then required) to the
	// destinations whose events match it.
	Destination string `json:"destination,omitempty"`

	// ID is the delivery ID, a placeholder. Default: the key
	// webhook_dedupe would use behind the webhook_verify in front; without
	// one, the Idempotency-Key header, else the body's "id" (a JSON
	// string). A delivery ID is 1 to 1024 bytes of visible ASCII, else 400
	// bad_id.
	ID string `json:"id,omitempty"`

	// EventType, Entity and EventTime describe the event (optional
	// placeholders, e.g. {webhook.json.type}); the event time is RFC 3339
	// or unix seconds.
	EventType string `json:"event_type,omitempty"`
	Entity    string `json:"entity,omitempty"`
	EventTime string `json:"event_time,omitempty"`
	// Tenant routes a fan-out to the tenant's subscribers only (a
	// placeholder); default none: to the destinations of no tenant.
	Tenant string `json:"tenant,omitempty"`

	// MaxBody is the largest body accepted, in bytes. Default 1 MiB.
	MaxBody int64 `json:"max_body,omitempty"`

	intake.Options

	app    *App
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
	maxBody, err := reqbody.Max(h.MaxBody)
	if err != nil {
		return err
	}
	h.MaxBody = maxBody
	app, err := appFrom(ctx)
	if err != nil {
		return err
	}
	if err := intake.CheckRoute(h.Destination, h.EventType, app.destinations); err != nil {
		return err
	}
	h.app = app
	return h.Check()
}

// ServeHTTP queues the event through package intake, which answers 405 to
// any method but POST, 400 to an empty body, to a body that must be JSON
// and is not, and to a missing or bad delivery ID (see intake.Inbound),
// and enqueues nothing then.
func (h *Enqueue) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	r, body, err := bufferBody(r, h.MaxBody)
	if err != nil {
		reqbody.WriteRejection(w, err)
		return nil
	}
	s := h.app.sender
	if s == nil {
		problem.Write(w, problem.StoreUnavailable, "the sender is not running", time.Second)
		return nil
	}
	repl := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	in := intake.Inbound{Body: body, ContentType: r.Header.Get("Content-Type"), ID: r.Header.Get("Idempotency-Key"),
		MustBeJSON: strings.Contains(h.ID, "{webhook.json."), EventType: repl.ReplaceKnown(h.EventType, ""),
		Entity: repl.ReplaceKnown(h.Entity, ""), EventTime: repl.ReplaceKnown(h.EventTime, ""), Tenant: repl.ReplaceKnown(h.Tenant, ""), TenantRequired: h.Tenant != ""}
	if b, _ := reqbody.Of(r); b.Delivery.Scheme != "" { // behind webhook_verify: its key
		in.Verified = &b.Delivery
		in.ID = cmp.Or(b.Delivery.DedupeKey(b.SHA256Hex), in.ID)
	}
	if h.ID != "" { // an unknown or empty placeholder is no ID, never a literal one
		in.ID, _ = repl.ReplaceOrErr(h.ID, true, true)
	}
	in.IDFromBody = h.ID == "" && in.ID == ""
	intake.Serve(w, r, s, &in, h.Destination, &h.Options, zaplog.Slog(h.logger))
	return nil
}

// Enqueue queues an event for delivery: the Go API for producers in the
// same process. It is idempotent by e.ID within e.Destination. An ID that
// is not 1 to 1024 bytes of visible ASCII is refused with an error that
// wraps sender.ErrBadID. An error otherwise leaves the outcome unknown
// (the store may have applied it): retry with the same ID.
func (a *App) Enqueue(ctx context.Context, e *sender.Envelope) (sender.EnqueueResult, error) {
	if a.sender == nil {
		return sender.EnqueueResult{}, errors.New("the sender is not running")
	}
	return a.sender.Enqueue(ctx, e)
}

// Publish fans an event out to every destination subscribed to its type:
// the Go API beside Enqueue, as webhook_enqueue without a destination. It
// is idempotent by ev.ID, and publishing again completes what a crash cut
// short. An error that wraps sender.ErrBadID or sender.ErrMissingEventType
// refuses the event; another leaves the outcome unknown: publish again.
func (a *App) Publish(ctx context.Context, ev *sender.Event) (sender.PublishResult, error) {
	if a.sender == nil {
		return sender.PublishResult{}, errors.New("the sender is not running")
	}
	return a.sender.Publish(ctx, ev)
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	webhook_enqueue [<destination>] {
//		id             <placeholder>
//		event_type     <placeholder>
//		entity         <placeholder>
//		event_time     <placeholder>
//		tenant         <placeholder>
//		max_body       <size>
//		keep_headers   <name>... | *
//		keep_path
//		redact_headers <name>...
//		answer         <status> [<body>]
//	}
//
// Without a destination the event fans out by its type: event_type is
// required.
func (h *Enqueue) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return cfparse.Directive(d, &h.Destination, "webhook_enqueue", cfparse.Block{
		{"id", cfparse.String(&h.ID)},
		{"event_type", cfparse.String(&h.EventType)},
		{"entity", cfparse.String(&h.Entity)},
		{"event_time", cfparse.String(&h.EventTime)},
		{"tenant", cfparse.String(&h.Tenant)},
		{"max_body", cfparse.Size(&h.MaxBody)},
		{"keep_headers", cfparse.List(&h.KeepHeaders)},
		{"keep_path", cfparse.Flag(&h.KeepPath)},
		{"redact_headers", cfparse.List(&h.RedactHeaders)},
		{"answer", func(d *caddyfile.Dispenser) error { return cfparse.ErrAt(d, h.ParseAnswer(d.RemainingArgs())) }},
	})
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Enqueue)(nil)
	_ caddyhttp.MiddlewareHandler = (*Enqueue)(nil)
	_ caddyfile.Unmarshaler       = (*Enqueue)(nil)
)
