package caddymodule

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/hookgate/hookgate/reconcile"
)

// TestScheduledRunIsBounded: a scheduled run ends with its period; a
// source that hangs does not hold it longer (it held it for the HTTP
// client's 30s).
func TestScheduledRunIsBounded(t *testing.T) {
	type call struct{ start, end time.Time }
	calls := make(chan call, 100)
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		<-r.Context().Done()
		calls <- call{start, time.Now()}
	}))
	t.Cleanup(hang.Close) // after the app stops: its runs end then
	empty := truthAPI(t, func() []reconcile.Row { return nil })
	loadApp(t, "", map[string]any{
		"reconcile": []map[string]any{{
			"name": "enrollments", "expect": map[string]string{"confirmed": "active"}, "every": "1s",
			"truth":    map[string]any{"kind": "http", "url": hang.URL},
			"receiver": map[string]any{"kind": "http", "url": empty.URL},
		}},
	})
	select {
	case c := <-calls:
		if took := c.end.Sub(c.start); took > 2*time.Second {
			t.Errorf("the run held the source for %s; want at most its period (1s)", took)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no scheduled run ended within 10s: not bounded by its period")
	}
}

// loadApp loads a config with the hookgate app (its store a temp dir)
// and returns the running app; the config stops when the test ends.
// admin is the admin API's listen address, or "" for none.
func loadApp(t *testing.T, admin string, hookgate map[string]any) *App {
	t.Helper()
	hookgate["store"] = map[string]any{"backend": "file", "dir": t.TempDir()}
	adminCfg := map[string]any{"disabled": true}
	if admin != "" {
		adminCfg = map[string]any{"listen": admin}
	}
	cfg, err := json.Marshal(map[string]any{"admin": adminCfg, "apps": map[string]any{"hookgate": hookgate}})
	if err != nil {
		t.Fatal(err)
	}
	if err := caddy.Load(cfg, true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = caddy.Stop() })
	v, err := caddy.ActiveContext().App("hookgate")
	if err != nil {
		t.Fatal(err)
	}
	return v.(*App)
}

// truthAPI serves a truth side over HTTP: rows, read at each request.
func truthAPI(t *testing.T, rows func() []reconcile.Row) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		type item struct {
			Key       string    `json:"key"`
			State     string    `json:"state"`
			Version   int64     `json:"version"`
			UpdatedAt time.Time `json:"updated_at"`
		}
		items := []item{}
		for _, r := range rows() {
			items = append(items, item{r.Key, r.State, r.Version, r.UpdatedAt})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"items": items}) // the test reads what arrives
	}))
	t.Cleanup(srv.Close)
	return srv
}
