package caddymodule

import (
	"context"
	"errors"
	"net/http"
	"slices"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/hookgate/hookgate/internal/health"
	"github.com/hookgate/hookgate/internal/zaplog"
)

func init() {
	caddy.RegisterModule(Health{})
	httpcaddyfile.RegisterHandlerDirective("webhook_health", parseHandler[Health])
	// A terminal handler: it answers, like respond.
	httpcaddyfile.RegisterDirectiveOrder("webhook_health", httpcaddyfile.Before, "respond")
}

// Health is the webhook_health handler, readiness (package health): 200
// {"status":"ok","store":"ok","sender":"ok"} when the store answers
// within a second and takes writes (store.Lazy.Ready: the latest write of
// the handlers or the sender's queue did not fail, or a write of its own
// succeeds) and the sender's
// workers run, else 503 with the failing part "unavailable". A part this
// config does not use is "off". It takes no options.
type Health struct {
	checker *health.Checker
}

// CaddyModule returns the Caddy module information.
func (Health) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.webhook_health", New: func() caddy.Module { return new(Health) }}
}

// Provision sets up the handler.
func (h *Health) Provision(ctx caddy.Context) error {
	app, err := appFrom(ctx)
	if err != nil {
		return err
	}
	h.checker = &health.Checker{Logger: zaplog.Slog(ctx.Logger()), Store: func(ctx context.Context) error {
		if !app.storeUsed { // set by the handlers' Provision, before any request
			return health.ErrOff
		}
		return app.store.Ready(ctx)
	}, Sender: func(context.Context) error {
		running.Lock()
		defer running.Unlock()
		switch {
		case len(app.destinations) == 0:
			return health.ErrOff
		case !slices.Contains(running.apps, app): // its sender runs from Start to Stop
			return errors.New("the sender's workers do not run: the hookgate app has not started, or has stopped")
		}
		return nil
	}}
	return nil
}

// ServeHTTP answers the readiness report; it never calls next.
func (h *Health) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	h.checker.ServeHTTP(w, r)
	return nil
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	webhook_health
func (h *Health) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() || d.NextBlock(0) {
		return d.Err("webhook_health takes no arguments and no block")
	}
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Health)(nil)
	_ caddyhttp.MiddlewareHandler = (*Health)(nil)
	_ caddyfile.Unmarshaler       = (*Health)(nil)
)
