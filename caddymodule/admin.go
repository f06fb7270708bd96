package caddymodule

import (
	"net/http"
	"slices"

	"github.com/caddyserver/caddy/v2"

	dedupeapi "github.com/hookgate/hookgate/dedupe/httpapi"
	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/internal/route"
	"github.com/hookgate/hookgate/internal/store"
	"github.com/hookgate/hookgate/internal/zaplog"
	"github.com/hookgate/hookgate/sender/httpapi"
)

func init() {
	caddy.RegisterModule(adminAPI{})
}

// adminAPI serves hookgate's admin endpoints under /hookgate/ on Caddy's
// admin endpoint, through the router of the hookgate app that runs
// (App.adminRouter): the sender's destinations and dead letters (package
// sender/httpapi, over the running app's sender.Ops), what the gateway
// remembers of a delivery or an entity (package dedupe/httpapi), and a
// backup of the embedded store (store.BackupHandler). JSON in and out;
// errors are problem+json.
//
// The app is found at each request: it is the hookgate app that runs (see
// running), not the one of the config this module was provisioned with,
// which Caddy may have refused.
type adminAPI struct{}

// CaddyModule returns the Caddy module information.
func (adminAPI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.hookgate",
		New: func() caddy.Module { return new(adminAPI) },
	}
}

// Routes returns the admin routes.
func (a *adminAPI) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{{Pattern: "/hookgate/", Handler: caddy.AdminHandlerFunc(a.serve)}}
}

// AdminEndpoints returns every route admin.api.hookgate serves under
// /hookgate/, in net/http's pattern syntax ("GET /hookgate/dlq/{id}"):
// dedupe/httpapi's, the store's backup, then sender/httpapi's; all are
// registered on one router (App.adminRouter).
// docs/admin-api.yaml describes
// each, and integration/openapi_test.go holds the two to each other: a
// route added to either package's table, or registered by adminRouter
// itself, goes into this list and into the document.
func AdminEndpoints() []string {
	return slices.Concat(dedupeapi.Endpoints(), []string{http.MethodGet + " " + store.BackupPath}, httpapi.Endpoints())
}

// serve answers every /hookgate/ route through the running app's router;
// it never returns an error: each is answered as problem+json.
func (a *adminAPI) serve(w http.ResponseWriter, r *http.Request) error {
	app := runningApp()
	if app == nil {
		problem.Write(w, problem.NoHookgate, "no hookgate app is running: no handler or destination of the running config uses it", 0)
		return nil
	}
	app.admin.ServeHTTP(w, r)
	return nil
}

// adminRouter is the router of the admin API over a, built once, at
// Start: AdminEndpoints' routes, each answered with a's sender, store and
// dedupers, and a 404 or 405 for a request none takes (no_sender when no
// sender runs). Without the store, its routes answer 404 no_store. Its
// log lines are the app's logger's, named hookgate.admin.
func (a *App) adminRouter() *route.Mux {
	logger := zaplog.Slog(a.logger.Named("admin"))
	senderAPI := httpapi.New(a.ops(), a.registry, a.portal, logger)
	m := &route.Mux{NotFound: senderAPI.NotFound}
	senderAPI.Register(m)
	backup := "GET " + store.BackupPath
	if !a.storeUsed {
		for _, pattern := range append(dedupeapi.Endpoints(), backup) {
			m.HandleFunc(pattern, func(w http.ResponseWriter, _ *http.Request) {
				problem.Write(w, problem.NoStore, "no handler of this config uses the store", 0)
			})
		}
		return m
	}
	m.Handle(backup, store.BackupHandler{Conn: a.store.Conn, Logger: logger})
	(&dedupeapi.Handler{Store: a.store, Logger: logger, Uncache: func(key string) {
		for _, d := range a.dedupers {
			d.Uncache(key)
		}
	}}).Register(m)
	return m
}

// Interface guards
var (
	_ caddy.AdminRouter = (*adminAPI)(nil)
)
