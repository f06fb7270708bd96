package caddymodule

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

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
	if h.MaxRedrive < 0 {
		return errors.New("webhook_console: max_redrive must be positive")
	}
	app, err := appFrom(ctx)
	if err != nil {
		return err
	}
	// The sender refuses a redrive over its own bound: the page must not
	// offer one.
	senderMax := sender.DefaultMaxRedrive
	if app.Sender != nil && app.Sender.MaxRedrive > 0 {
		senderMax = app.Sender.MaxRedrive
	}
	if h.MaxRedrive == 0 {
		h.MaxRedrive = min(console.DefaultRedriveBatch, senderMax)
	}
	if h.MaxRedrive > senderMax {
		return fmt.Errorf("webhook_console: max_redrive %d is over the sender's max_redrive %d, which would refuse such a redrive", h.MaxRedrive, senderMax)
	}
	if len(app.Destinations) == 0 {
		return errors.New("webhook_console: no sender to show: configure a destination in the hookgate global option")
	}
	if h.Destination != "" && !strings.Contains(h.Destination, "{") && !app.hasDestination(h.Destination) {
		return fmt.Errorf("webhook_console: destination %q is not configured in the hookgate global option", h.Destination)
	}
	if clientChosen(h.Destination) {
		ctx.Logger().Warn("webhook_console is scoped by a placeholder the client chooses: anyone can name any destination; scope by an authenticated identity such as {http.auth.user.id}",
			zap.String("destination", h.Destination))
	}
	h.app, h.once = app, new(sync.Once)
	return nil
}

// clientChosen reports a scope placeholder whose value the client sets:
// a header, the query, a cookie or the path.
func clientChosen(p string) bool {
	for _, prefix := range []string{"{http.request.header.", "{http.request.uri", "{http.request.cookie.", "{query.", "{header.", "{cookie.", "{path", "{http.request.orig_uri"} {
		if strings.Contains(p, prefix) {
			return true
		}
	}
	return false
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
	v := console.View{Base: mountPath(r)}
	if h.Destination != "" {
		v.Scope = repl.ReplaceAll(h.Destination, "")
		if v.Scope == "" || !h.app.hasDestination(v.Scope) {
			problem.Write(w, problem.ConsoleScopeUnknown, "this console is scoped to a destination, and this request names none that is configured", 0)
			return nil
		}
	}
	v.By = "console"
	if user, _ := repl.GetString("http.auth.user.id"); user != "" {
		v.By += " user " + strconv.Quote(user)
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		v.By += " from " + host
	}
	h.console.Serve(w, r, v)
	return nil
}

// mountPath is the prefix handle_path stripped from the request's path:
// the original path less the path left, both cleaned as Caddy's matchers
// clean them. It always starts with exactly one slash, or is "" (the
// root): links and redirects built on it never leave the host.
func mountPath(r *http.Request) string {
	orig, ok := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request)
	if !ok {
		return ""
	}
	clean := func(p string) string { return strings.TrimSuffix(path.Clean("/"+p), "/") }
	base, found := strings.CutSuffix(clean(orig.URL.EscapedPath()), clean(r.URL.EscapedPath()))
	if !found || strings.HasPrefix(base, "//") || (base != "" && base[0] != '/') {
		return ""
	}
	return base
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	webhook_console {
//		destination <placeholder>
//		max_redrive <n>
//	}
func (h *Console) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() {
		return d.ArgErr()
	}
	return parseBlock(d, "webhook_console", block{
		{"destination", stringArg(&h.Destination)},
		{"max_redrive", intArg(&h.MaxRedrive)},
	})
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Console)(nil)
	_ caddyhttp.MiddlewareHandler = (*Console)(nil)
	_ caddyfile.Unmarshaler       = (*Console)(nil)
)
