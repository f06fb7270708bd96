package httpapi

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/dedupe/boltstore"
	"github.com/hookgate/hookgate/internal/boltfile"
	"github.com/hookgate/hookgate/internal/bolttest"
	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/internal/route"
)

// TestLookupAndForget: a recorded delivery is shown, forgotten once (its
// key uncached), then absent; a method or key that is not a route is a
// precise problem.
func TestLookupAndForget(t *testing.T) {
	db := bolttest.Open(t, boltfile.Options(time.Second, false))
	s, err := boltstore.New(db, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	now := time.Now()
	ctx := t.Context()
	key := "evt/1 ü"
	res, err := s.Claim(ctx, key, dedupe.Claim{Token: "t", Lease: time.Minute, Retention: time.Hour, Now: now})
	if err != nil || res.Status != dedupe.Claimed {
		t.Fatal(res, err)
	}
	if err := s.Record(ctx, key, "t", dedupe.Record{Status: 201, Body: []byte("ok")}, time.Hour, now); err != nil {
		t.Fatal(err)
	}
	var uncached []string
	var logs bytes.Buffer
	h := &Handler{Store: s, Uncache: func(k string) { uncached = append(uncached, k) }, Logger: slog.New(slog.NewJSONHandler(&logs, nil))}
	var mux route.Mux
	h.Register(&mux)
	var allow string
	do := func(method, path string) (int, map[string]any) {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest(method, path, nil))
		allow = w.Header().Get("Allow")
		var out map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, w.Body)
		}
		return w.Code, out
	}
	path := "/hookgate/dedupe/evt%2F1%20%C3%BC"
	if code, out := do("GET", path); code != 200 || out["state"] != "recorded" || out["status"] != 201.0 || out["key"] != key {
		t.Errorf("GET: %d %v", code, out)
	}
	if code, out := do("DELETE", path); code != 200 || out["forgotten"] != true || len(uncached) != 1 || uncached[0] != key {
		t.Errorf("DELETE: %d %v, uncached %q", code, out, uncached)
	}
	if !bytes.Contains(logs.Bytes(), []byte("dedupe record forgotten")) {
		t.Errorf("no audit line: %s", logs.String())
	}
	if code, out := do("DELETE", path); code != 404 || out["reason"] != problem.NotFound.Code {
		t.Errorf("second DELETE: %d %v", code, out)
	}
	if code, out := do("GET", path); code != 200 || out["state"] != "absent" {
		t.Errorf("GET after forget: %d %v", code, out)
	}
	if code, out := do("GET", "/hookgate/freshness/e1"); code != 200 || out["entity"] != "e1" || out["event_time"] == nil {
		t.Errorf("freshness: %d %v", code, out)
	}
	for _, tt := range []struct {
		method, path string
		code         int
		reason       string
	}{
		{"POST", path, 405, problem.MethodNotAllowed.Code},
		{"GET", "/hookgate/dedupe/", 400, problem.BadRequest.Code},
	} {
		if code, out := do(tt.method, tt.path); code != tt.code || out["reason"] != tt.reason {
			t.Errorf("%s %s: %d %v, want %d %s", tt.method, tt.path, code, out, tt.code, tt.reason)
		}
		if tt.code == 405 && allow != "DELETE, GET, HEAD" {
			t.Errorf("%s %s: Allow %q, want DELETE, GET, HEAD", tt.method, tt.path, allow)
		}
	}
}

// TestDotKeys: the keys "." and ".." come escaped as pathseg writes them
// ("%20." and "%20.."), since a server's path cleaning drops them bare.
func TestDotKeys(t *testing.T) {
	db := bolttest.Open(t, boltfile.Options(time.Second, false))
	s, err := boltstore.New(db, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	now := time.Now()
	h := Handler{Store: s, Logger: slog.New(slog.DiscardHandler)}
	var mux route.Mux
	h.Register(&mux)
	for key, path := range map[string]string{".": "/hookgate/dedupe/%20.", "..": "/hookgate/dedupe/%20.."} {
		if _, err := s.Claim(t.Context(), key, dedupe.Claim{Token: "t", Lease: time.Minute, Retention: time.Hour, Now: now}); err != nil {
			t.Fatal(err)
		}
		for _, method := range []string{"GET", "DELETE"} {
			w := httptest.NewRecorder()
			mux.ServeHTTP(w, httptest.NewRequest(method, path, nil))
			var out map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || w.Code != 200 || out["key"] != key {
				t.Errorf("%s %s: %d %s, want 200 with key %q", method, path, w.Code, w.Body, key)
			}
		}
	}
}
