package route

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hookgate/hookgate/internal/problem"
)

// TestMux: a route serves with its wildcards read back (pathseg's "%20."
// and "%20.." as "." and ".."); a path no route takes is 404 not_found, a
// known path with another method 405 method_not_allowed with Allow, and
// a path ServeMux would redirect 404, all problem+json.
func TestMux(t *testing.T) {
	var m Mux
	m.HandleFunc("GET /a/{id}", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("a " + Value(r, "id"))) })
	m.HandleFunc("POST /a/{id}/go", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotFound) })
	m.HandleFunc("GET /b/{d}/{id...}", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("b " + Value(r, "d") + " " + Value(r, "id")))
	})
	for _, tt := range []struct {
		method, target string
		status         int
		body, reason   string
		allow          string
	}{
		{"GET", "/a/x", 200, "a x", "", ""},
		{"HEAD", "/a/x", 200, "a x", "", ""}, // a GET route takes HEAD; the server drops the body
		{"GET", "/a/%20.", 200, "a .", "", ""},
		{"GET", "/a/%20..", 200, "a ..", "", ""},
		{"GET", "/a/x%2Fy", 200, "a x/y", "", ""},
		{"GET", "/b/d/x/%20../y", 200, "b d x/../y", "", ""},
		{"POST", "/a/x/go", 404, "", "", ""}, // the route's own 404 goes through
		{"GET", "/nope", 404, "", "not_found", ""},
		{"GET", "/a/x/y", 404, "", "not_found", ""},
		{"GET", "/b/d", 404, "", "not_found", ""},   // ServeMux would redirect to /b/d/
		{"GET", "/a/./x", 404, "", "not_found", ""}, // ServeMux would redirect to /a/x
		{"PUT", "/a/x", 405, "", "method_not_allowed", "GET, HEAD"},
		{"GET", "/a/x/go", 405, "", "method_not_allowed", "POST"},
	} {
		w := httptest.NewRecorder()
		m.ServeHTTP(w, httptest.NewRequest(tt.method, tt.target, nil))
		if w.Code != tt.status || w.Header().Get("Allow") != tt.allow || w.Header().Get("Location") != "" {
			t.Errorf("%s %s: %d Allow %q Location %q, want %d Allow %q", tt.method, tt.target, w.Code, w.Header().Get("Allow"), w.Header().Get("Location"), tt.status, tt.allow)
		}
		if tt.reason == "" {
			if w.Body.String() != tt.body {
				t.Errorf("%s %s: body %q, want %q", tt.method, tt.target, w.Body, tt.body)
			}
			continue
		}
		var p problem.Details
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Reason != tt.reason || w.Header().Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s %s: %s %s, want problem+json %s", tt.method, tt.target, w.Header().Get("Content-Type"), w.Body, tt.reason)
		}
	}
}

// TestMuxAnswers: NotFound and MethodNotAllowed, when set, answer.
func TestMuxAnswers(t *testing.T) {
	m := Mux{
		NotFound:         func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) },
		MethodNotAllowed: func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusConflict) },
	}
	m.HandleFunc("GET /a", func(http.ResponseWriter, *http.Request) {})
	for target, want := range map[string]int{"/b": http.StatusTeapot, "/a": http.StatusConflict} {
		w := httptest.NewRecorder()
		m.ServeHTTP(w, httptest.NewRequest("POST", target, nil))
		if w.Code != want {
			t.Errorf("POST %s: %d, want %d", target, w.Code, want)
		}
	}
}
