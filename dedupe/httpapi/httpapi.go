// Package httpapi serves, over plain net/http, what the gateway remembers
// of a delivery or an entity: GET and DELETE /hookgate/dedupe/<key>, and
// GET /hookgate/freshness/<entity>. Caddy's admin module registers its
// routes beside the sender's API (Register). JSON out; errors are
// problem+json; another method is 405 method_not_allowed, answered by the
// router (package route).
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/dedupe/freshness"
	"github.com/hookgate/hookgate/internal/pathseg"
	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/internal/route"
)

// Store is what the handler reads and forgets.
type Store interface {
	Get(ctx context.Context, key string, now time.Time) (dedupe.Entry, error)
	Forget(ctx context.Context, key string) (bool, error)
	GetEntity(ctx context.Context, entity string, now time.Time) (freshness.EntityState, error)
}

// Handler answers the routes, once registered on a router. Uncache, if set, drops a forgotten key from
// each deduper's replay cache.
type Handler struct {
	Store   Store
	Uncache func(key string)
	Logger  *slog.Logger
	Now     func() time.Time
}

// endpoint is a route, METHOD /hookgate/<kind>/{<param>...}: the param
// is the rest of the path, unescaped, so it may hold any character.
type endpoint struct {
	method, kind, param string
	serve               func(h Handler, r *http.Request, key string, now time.Time) (map[string]any, error)
}

// endpoints are the routes Handler serves. A new one goes here and into
// docs/admin-api.yaml, which integration/openapi_test.go holds to this
// list.
var endpoints = []endpoint{
	{http.MethodGet, "dedupe", "key", Handler.entry},
	{http.MethodDelete, "dedupe", "key", Handler.forget},
	{http.MethodGet, "freshness", "entity", Handler.entity},
}

// Endpoints returns the routes Handler serves, in net/http's pattern
// syntax: "GET /hookgate/dedupe/{key...}".
func Endpoints() []string {
	out := make([]string, len(endpoints))
	for i, e := range endpoints {
		out[i] = e.method + " /hookgate/" + e.kind + "/{" + e.param + "...}"
	}
	return out
}

// errNotHeld is a forget of a key the store holds nothing for.
var errNotHeld = errors.New("the store holds nothing for this key")

// Register registers the routes Endpoints lists on mux.
func (h *Handler) Register(mux *route.Mux) {
	for _, e := range endpoints {
		mux.HandleFunc(e.method+" /hookgate/"+e.kind+"/{"+e.param+"...}", func(w http.ResponseWriter, r *http.Request) {
			h.serve(w, r, e)
		})
	}
}

// keyOf is the key or entity a request to e names: the rest of the path,
// unescaped (pathseg: "." and ".." come as "%20." and "%20.."), so it may
// hold any character.
func keyOf(r *http.Request, e endpoint) (string, error) {
	esc := strings.TrimPrefix(r.URL.EscapedPath(), "/hookgate/"+e.kind+"/")
	return pathseg.Unescape(esc)
}

// serve answers a request to e.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request, e endpoint) {
	key, err := keyOf(r, e)
	if err != nil || key == "" {
		problem.Write(w, problem.BadRequest, "a "+e.kind+" needs a key", 0)
		return
	}
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	out, err := e.serve(*h, r, key, now())
	if errors.Is(err, errNotHeld) {
		problem.Write(w, problem.NotFound, err.Error(), 0)
		return
	}
	if err != nil {
		h.Logger.Error("admin request failed", "path", r.URL.Path, "error", err)
		problem.Write(w, problem.StoreUnavailable, err.Error(), time.Second)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // a key is shown byte for byte
	_ = enc.Encode(out)      // a client gone away has no one to tell
}

// forget drops what the store holds of a delivery, so that its next copy
// is forwarded as new; errNotHeld when it holds nothing.
func (h Handler) forget(r *http.Request, key string, _ time.Time) (map[string]any, error) {
	found, err := h.Store.Forget(r.Context(), key)
	if err != nil {
		return nil, err
	}
	if h.Uncache != nil {
		h.Uncache(key)
	}
	if !found {
		return nil, errNotHeld
	}
	h.Logger.Warn("dedupe record forgotten: the next copy of this delivery is forwarded as new", "key", key, "by", r.RemoteAddr)
	return map[string]any{"key": key, "forgotten": true}, nil
}

// entry is what the store holds of a delivery.
func (h Handler) entry(r *http.Request, key string, now time.Time) (map[string]any, error) {
	e, err := h.Store.Get(r.Context(), key, now)
	if err != nil {
		return nil, err
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
	return out, nil
}

// entity is what the store holds of an entity: its watermark and lease,
// by event time and by sequence.
func (h Handler) entity(r *http.Request, entity string, now time.Time) (map[string]any, error) {
	out := map[string]any{"entity": entity}
	for _, by := range []struct{ prefix, name string }{{"t:", "event_time"}, {"s:", "sequence"}} {
		st, err := h.Store.GetEntity(r.Context(), by.prefix+entity, now)
		if err != nil {
			return nil, err
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
	return out, nil
}
