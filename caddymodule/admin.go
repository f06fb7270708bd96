package caddymodule

import (
	"net/http"
	"slices"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	dedupeapi "github.com/hookgate/hookgate/dedupe/httpapi"
	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/internal/store"
	"github.com/hookgate/hookgate/sender/httpapi"
)

func init() {
	caddy.RegisterModule(adminAPI{})
}

// adminAPI serves hookgate's admin endpoints under /hookgate/ on Caddy's
// admin endpoint: the sender's destinations and dead letters (package
// sender/httpapi, over the running app's sender.Ops), and what the
// gateway remembers of a delivery or an entity (package dedupe/httpapi),
// and a backup of the embedded store (store.BackupHandler).
// JSON in and out; errors are problem+json.
type adminAPI struct {
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

// AdminEndpoints returns every route admin.api.hookgate serves under
// /hookgate/, in net/http's pattern syntax ("GET /hookgate/dlq/{id}"):
// dedupe/httpapi's, the store's backup, then sender/httpapi's.
// docs/admin-api.yaml describes
// each, and integration/openapi_test.go holds the two to each other: a
// route added to either package's table, or served here by serve itself,
// goes into this list and into the document.
func AdminEndpoints() []string {
	return slices.Concat(dedupeapi.Endpoints(), []string{http.MethodGet + " " + store.BackupPath}, httpapi.Endpoints())
}

// serve answers every /hookgate/ route of the running app; it never
// returns an error: each is answered as problem+json.
func (a *adminAPI) serve(w http.ResponseWriter, r *http.Request) error {
	app := runningApp()
	if app == nil {
		problem.Write(w, http.StatusNotFound, reasonNoHookgate, "no hookgate app is running: no handler or destination of the running config uses it", 0)
		return nil
	}
	logger := zapslogLogger(a.logger)
	path := r.URL.EscapedPath()
	if path != store.BackupPath && !dedupeapi.Routes(path) {
		httpapi.New(app.ops(), logger).ServeHTTP(w, r)
		return nil
	}
	if !app.storeUsed {
		problem.Write(w, http.StatusNotFound, reasonNoStore, "no handler of this config uses the store", 0)
		return nil
	}
	if path == store.BackupPath {
		store.BackupHandler{Conn: app.store.Conn, Logger: logger}.ServeHTTP(w, r)
		return nil
	}
	dedupeapi.Handler{Store: app.store, Logger: logger, Uncache: func(key string) {
		for _, d := range app.dedupers {
			d.Uncache(key)
		}
	}}.ServeHTTP(w, r)
	return nil
}

// Interface guards
var (
	_ caddy.AdminRouter = (*adminAPI)(nil)
	_ caddy.Provisioner = (*adminAPI)(nil)
)
