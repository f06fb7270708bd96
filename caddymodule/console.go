package caddymodule

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/hookgate/hookgate/caddymodule/cfparse"
	"github.com/hookgate/hookgate/console"
	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/sender"
)

func init() {
	caddy.RegisterModule(Console{})
	httpcaddyfile.RegisterHandlerDirective("webhook_console", parseHandler[Console])
	// A terminal handler: it answers, like respond.
	httpcaddyfile.RegisterDirectiveOrder("webhook_console", httpcaddyfile.Before, "respond")
}

// Console is the webhook_console handler: the dead-letter triage page
// (package console) over the sender of the hookgate app. Mount it with
// handle_path, so that it sees the paths below its prefix:
//
//	handle_path /console/* {
//		basic_auth { ... }
//		webhook_console
//	}
type Console struct {
	// Destination scopes the console to one destination: a placeholder
	// such as {http.auth.user.id}, resolved per request. A request for
	// which it resolves to nothing, or to no configured destination, is
	// refused: a scoped console never falls back to every destination.
	// Empty: the operator's view of every destination.
	Destination string `json:"destination,omitempty"`
	// Portal scopes each request to the tenant of its portal link
	// (portal_key): a customer's console, with no other login.
	Portal bool `json:"portal,omitempty"`

	// MaxRedrive is the most one redrive from the page may move: at most
	// the sender's max_redrive. Default 100, or the sender's max_redrive
	// when that is lower.
	MaxRedrive int `json:"max_redrive,omitempty"`

	app     *App
	once    *sync.Once // builds console at the first request the sender can serve
	console *console.Console
}

// CaddyModule returns the Caddy module information.
func (Console) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.webhook_console",
		New: func() caddy.Module { return new(Console) },
	}
}

// Provision sets up the handler.
func (h *Console) Provision(ctx caddy.Context) error {
	app, err := appFrom(ctx)
	if err != nil {
		return err
	}
	senderMax := sender.DefaultMaxRedrive
	if app.Sender != nil && app.Sender.MaxRedrive > 0 {
		senderMax = app.Sender.MaxRedrive
	}
	if h.MaxRedrive, err = console.MaxRedriveFor(h.MaxRedrive, senderMax); err != nil {
		return fmt.Errorf("webhook_console: %w", err)
	}
	if app.Sender == nil {
		return errors.New("webhook_console: no sender to show: configure a destination, or the sender block, in the hookgate global option")
	}
	if h.Destination != "" && !strings.Contains(h.Destination, "{") && !app.hasDestination(h.Destination) {
		return fmt.Errorf("webhook_console: destination %q is not configured in the hookgate global option", h.Destination)
	}
	if h.Portal && (h.Destination != "" || app.portal == nil) {
		return errors.New("webhook_console: portal takes its scope from the link, without destination, and needs portal_key and portal_url in the hookgate global option")
	}
	if console.ClientChosen(h.Destination) {
		ctx.Logger().Warn("webhook_console is scoped by a placeholder the client chooses: anyone can name any destination; scope by an authenticated identity such as {http.auth.user.id}",
			zap.String("destination", h.Destination))
	}
	h.app, h.once = app, new(sync.Once)
	return nil
}

// ServeHTTP serves the console's pages; it never calls next.
func (h *Console) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	if h.app.sender == nil {
		problem.Write(w, problem.SenderNotRunning, "the sender is not running yet", 0)
		return nil
	}
	// The app's service exists once its sender runs, after Provision.
	// The confirm tokens live in the app's store, so that instances
	// sharing Redis share them.
	h.once.Do(func() {
		h.console = console.New(h.app.ops(), h.app.store.Claims("console"), nil)
		h.console.MaxRedrive = h.MaxRedrive
	})
	repl := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	v := console.View{}
	// The prefix handle_path stripped.
	if orig, ok := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request); ok {
		v.Base = console.MountBase(orig.URL.EscapedPath(), r.URL.EscapedPath())
	}
	if h.Destination != "" {
		v.Scope.Destination = repl.ReplaceAll(h.Destination, "")
		if v.Scope.Destination == "" || !h.app.ops().Configured(v.Scope.Destination) { // the Caddyfile's or the API's, now
			problem.Write(w, problem.ConsoleScopeUnknown, "this console is scoped to a destination, and this request names none that is configured", 0)
			return nil
		}
	}
	user, _ := repl.GetString("http.auth.user.id")
	v.By = console.By(user, r.RemoteAddr)
	if h.Portal {
		tenant, opened, err := h.app.portal.Open(w, r, v.Base)
		if err != nil || opened {
			h.console.Refuse(w, r, v, err) // nil: opened, answered
			return nil
		}
		v.Scope.Tenant, v.By = tenant, "portal of tenant "+tenant+strings.TrimPrefix(v.By, "console")
	}
	h.console.Serve(w, r, v)
	return nil
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	webhook_console {
//		destination <placeholder>
//		portal
//		max_redrive <n>
//	}
func (h *Console) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return cfparse.Directive(d, nil, "webhook_console", cfparse.Block{
		{"destination", cfparse.String(&h.Destination)},
		{"portal", cfparse.Flag(&h.Portal)},
		{"max_redrive", cfparse.Int(&h.MaxRedrive)},
	})
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Console)(nil)
	_ caddyhttp.MiddlewareHandler = (*Console)(nil)
	_ caddyfile.Unmarshaler       = (*Console)(nil)
)
