package caddymodule

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/sender/httpapi"
)

func init() {
	caddy.RegisterModule(adminAPI{})
}

// adminAPI serves hookgate's admin endpoints under /hookgate/ on Caddy's
// admin endpoint: the sender's destinations and dead letters (package
// httpapi, over the running app's sender.Ops), and what the gateway
// remembers of a delivery or an entity. JSON in and out; errors are
// problem+json.
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

// serve answers every /hookgate/ route of the running app; it never
// returns an error: each is answered as problem+json.
func (a *adminAPI) serve(w http.ResponseWriter, r *http.Request) error {
	app := runningApp()
	if app == nil {
		problem.Write(w, http.StatusNotFound, reasonNoHookgate, "no hookgate app is running: no handler or destination of the running config uses it", 0)
		return nil
	}
	logger := zapslogLogger(a.logger)
	rest := strings.TrimPrefix(r.URL.EscapedPath(), "/hookgate/")
	for _, kind := range []string{"dedupe", "freshness"} {
		if esc, ok := strings.CutPrefix(rest, kind+"/"); ok {
			if err := a.remembered(w, r, app, kind, esc); err != nil {
				httpapi.WriteError(w, r, err, logger)
			}
			return nil
		}
	}
	httpapi.New(app.ops(), logger).ServeHTTP(w, r)
	return nil
}

// remembered serves GET and DELETE /hookgate/dedupe/<key> and GET
// /hookgate/freshness/<entity>: what the gateway remembers of a delivery or
// an entity, and forgetting a delivery. The key or entity is the rest of
// the path, esc, unescaped: it may hold any character.
func (a *adminAPI) remembered(w http.ResponseWriter, r *http.Request, app *App, kind, esc string) error {
	key, err := url.PathUnescape(esc)
	if err != nil || key == "" {
		return httpapi.Errorf(http.StatusBadRequest, reasonBadRequest, "a %s needs a key", kind)
	}
	if !app.storeUsed {
		return httpapi.Errorf(http.StatusNotFound, reasonNoStore, "no handler of this config uses the store")
	}
	if _, err := app.store.Conn(); err != nil {
		return err
	}
	now := time.Now()
	switch {
	case kind == "dedupe" && r.Method == http.MethodGet:
		e, err := app.store.Get(r.Context(), key, now)
		if err != nil {
			return err
		}
		out := map[string]any{"key": key, "state": "absent"}
		switch e.State {
		case dedupe.StateClaimed:
			out["state"], out["lease_until"] = "claimed", e.LeaseUntil
		case dedupe.StateRecorded:
			out["state"], out["status"], out["body_omitted"] = "recorded", e.Record.Status, e.Record.BodyOmitted
			out["body_bytes"] = len(e.Record.Body)
		}
		if e.State != dedupe.Absent {
			out["fingerprint"], out["expires_at"] = e.Fingerprint.String(), e.Expires
		}
		return httpapi.WriteJSON(w, http.StatusOK, out)
	case kind == "dedupe" && r.Method == http.MethodDelete:
		found, err := app.store.Forget(r.Context(), key)
		if err != nil {
			return err
		}
		for _, d := range app.dedupers {
			d.Uncache(key)
		}
		if !found {
			return httpapi.Errorf(http.StatusNotFound, reasonNotFound, "the store holds nothing for this key")
		}
		a.logger.Warn("dedupe record forgotten: the next copy of this delivery is forwarded as new",
			zap.String("key", key), zap.String("by", r.RemoteAddr))
		return httpapi.WriteJSON(w, http.StatusOK, map[string]any{"key": key, "forgotten": true})
	case kind == "freshness" && r.Method == http.MethodGet:
		out := map[string]any{"entity": key}
		for _, by := range []struct{ prefix, name string }{{"t:", "event_time"}, {"s:", "sequence"}} {
			st, err := app.store.GetEntity(r.Context(), by.prefix+key, now)
			if err != nil {
				return err
			}
			v := map[string]any{"watermark": nil, "lease_until": nil}
			if st.HasWatermark {
				v["watermark"], v["expires_at"] = st.Watermark, st.WatermarkExpires
				if by.prefix == "t:" {
					v["watermark"] = time.UnixMicro(st.Watermark).UTC()
				}
			}
			if !st.LeaseUntil.IsZero() {
				v["lease_until"] = st.LeaseUntil
			}
			out[by.name] = v
		}
		return httpapi.WriteJSON(w, http.StatusOK, out)
	}
	return httpapi.Errorf(http.StatusMethodNotAllowed, reasonMethodNotAllowed, "%s is not allowed here", r.Method)
}

// Interface guards
var (
	_ caddy.AdminRouter = (*adminAPI)(nil)
	_ caddy.Provisioner = (*adminAPI)(nil)
)
