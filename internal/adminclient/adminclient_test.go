package adminclient

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/problem"
)

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		addr, base, name string
	}{
		{"localhost:2019", "http://localhost:2019", "http://localhost:2019"},
		{"http://127.0.0.1:2019/", "http://127.0.0.1:2019", "http://127.0.0.1:2019"},
		{"unix//run/hookgate/admin.sock|0600", "http://127.0.0.1", "unix//run/hookgate/admin.sock"},
		{"unix//run/hookgate/admin.sock", "http://127.0.0.1", "unix//run/hookgate/admin.sock"},
		{"unix/admin.sock", "http://127.0.0.1", "unix/admin.sock"},
	} {
		e, err := New(tc.addr, 0)
		if err != nil {
			t.Errorf("New(%q): %v", tc.addr, err)
			continue
		}
		if e.Base.String() != tc.base || e.Name != tc.name {
			t.Errorf("New(%q): base %s, name %s; want %s, %s", tc.addr, e.Base, e.Name, tc.base, tc.name)
		}
	}
	for _, addr := range []string{"unix/", "unix/|0600", "http://", "ftp://host:21"} {
		if _, err := New(addr, 0); err == nil || err.Error() != "--address: want host:port, an http:// URL, or unix//path/to/admin.sock" {
			t.Errorf("New(%q) = %v, want the address error", addr, err)
		}
	}
}

// TestDefaultAddress: no address is CADDY_ADMIN's, else localhost:2019.
func TestDefaultAddress(t *testing.T) {
	t.Setenv("CADDY_ADMIN", "")
	if e, err := New("", 0); err != nil || e.Name != "http://localhost:2019" {
		t.Errorf("New(\"\") without CADDY_ADMIN: %v, %v; want http://localhost:2019", e, err)
	}
	t.Setenv("CADDY_ADMIN", "unix//run/hookgate/admin.sock|0600")
	if e, err := New("", 0); err != nil || e.Name != "unix//run/hookgate/admin.sock" {
		t.Errorf("New(\"\") with CADDY_ADMIN: %v, %v; want the socket", e, err)
	}
}

// TestCall: a JSON body goes out as JSON and the answer comes back; a
// problem+json refusal is an *Error with its status, reason and detail;
// another refusal, one with its status and body; a request over the
// timeout fails.
func TestCall(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/echo":
			b, _ := io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"method":%q,"type":%q,"body":%s}`, r.Method, r.Header.Get("Content-Type"), b)
		case "/problem":
			problem.Write(w, problem.DestinationOrphaned, "no destination \"a\" is configured", 0)
		case "/slow":
			<-release
		default:
			http.Error(w, "nothing here", http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // before Close, which waits for the slow handler
	e, err := New(srv.URL, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.Call(t.Context(), http.MethodPost, "/echo", map[string]int{"limit": 1})
	if want := `{"method":"POST","type":"application/json","body":{"limit":1}}`; err != nil || string(got) != want {
		t.Errorf("Call /echo = %s, %v; want %s", got, err, want)
	}
	_, err = e.Call(t.Context(), http.MethodGet, "/problem", nil)
	ae, ok := errors.AsType[*Error](err)
	if !ok || ae.Status != 409 || ae.Reason != "destination_orphaned" || err.Error() != `no destination "a" is configured (409 destination_orphaned)` {
		t.Errorf("Call /problem = %v (%#v), want a 409 destination_orphaned *Error", err, ae)
	}
	_, err = e.Call(t.Context(), http.MethodGet, "/nope", nil)
	if ae, ok := errors.AsType[*Error](err); !ok || ae.Status != 404 || ae.Reason != "" || err.Error() != "404 Not Found: nothing here" {
		t.Errorf("Call /nope = %v, want a 404 *Error with its body", err)
	}
	short, err := New(srv.URL, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := short.Call(t.Context(), http.MethodGet, "/slow", nil); err == nil || !strings.Contains(err.Error(), "is the gateway running") {
		t.Errorf("Call /slow over the timeout = %v, want a timeout naming the endpoint", err)
	}
}
