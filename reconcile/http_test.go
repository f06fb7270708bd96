package reconcile_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/reconcile"
)

// drain reads every row of src and returns how many there were and the
// first error.
func drain(ctx context.Context, src reconcile.Source) (int, error) {
	n := 0
	for _, err := range src.Rows(ctx) {
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// TestHTTPSourceCursorLoop: an endpoint whose cursors cycle (a, b, a, ...)
// is an error as soon as it answers a cursor already sent, not a run that
// pages for ever; the error does not show the cursor (it is part of the
// query). A cursor answered again right away is the same error.
func TestHTTPSourceCursorLoop(t *testing.T) {
	for name, next := range map[string]map[string]string{
		"a, b, a":       {"": "a", "a": "b", "b": "a"},
		"a, a":          {"": "a", "a": "a"},
		"a, b, c, b, c": {"": "a", "a": "b", "b": "c", "c": "b"},
	} {
		t.Run(name, func(t *testing.T) {
			var pages atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				pages.Add(1)
				// Empty pages: nothing out of key order ever shows the loop.
				_, _ = fmt.Fprintf(w, `{"items":[],"next":%q}`, next[r.URL.Query().Get("cursor")])
			}))
			defer srv.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			_, err := drain(ctx, reconcile.HTTP{URL: srv.URL})
			if err == nil || !strings.Contains(err.Error(), "paging loops") {
				t.Fatalf("after %d pages: err = %v, want the paging loop", pages.Load(), err)
			}
			if want := len(next); pages.Load() != int64(want) {
				t.Errorf("fetched %d pages, want %d: each cursor once", pages.Load(), want)
			}
			if strings.Contains(err.Error(), `"a"`) || strings.Contains(err.Error(), `"b"`) {
				t.Errorf("the error shows a cursor: %v", err)
			}
		})
	}
}

// TestHTTPSourceFollowsNoRedirect: a 3xx is an error naming the status
// and the endpoint's scheme://host:port alone; the redirect's target never
// sees the request, nor its Authorization header.
func TestHTTPSourceFollowsNoRedirect(t *testing.T) {
	var reached atomic.Int64
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		_, _ = fmt.Fprint(w, `{"items":[]}`)
	}))
	defer elsewhere.Close()
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, elsewhere.URL+"/stolen?from=redirect", status)
		}))
		src := reconcile.HTTP{URL: srv.URL + "/api/enrollments/k3y?token=s3cret", Header: http.Header{"Authorization": {"Bearer t0k3n"}}}
		_, err := drain(t.Context(), src)
		srv.Close()
		if err == nil {
			t.Fatalf("%d: no error", status)
		}
		if msg := err.Error(); !strings.Contains(msg, fmt.Sprint(status)) || !strings.Contains(msg, srv.URL+",") {
			t.Errorf("%d: err = %q; want the status and %s", status, msg, srv.URL)
		}
		assertNoSecret(t, err, "k3y", "s3cret", "t0k3n", "stolen", "enrollments")
	}
	// A caller's own client follows none either.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL, http.StatusFound)
	}))
	defer srv.Close()
	if _, err := drain(t.Context(), reconcile.HTTP{URL: srv.URL, Client: &http.Client{}}); err == nil {
		t.Error("with the caller's client: no error")
	}
	if reached.Load() != 0 {
		t.Errorf("the redirect's target was reached %d times", reached.Load())
	}
}

// TestHTTPSourceErrorsHideTheURL: whatever fails (a refused connection, a
// timeout, an error status, an answer that is not JSON, a URL that does
// not parse), the error names scheme://host:port and never the URL's user
// info, path or query.
func TestHTTPSourceErrorsHideTheURL(t *testing.T) {
	const secretPart = "/hooks/p4th-s3cret?api_key=qu3ry-s3cret"
	refused := func() string { // a port nothing listens on
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = l.Close() }()
		return l.Addr().String()
	}()
	hang := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(hang)
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/html" {
			_, _ = fmt.Fprint(w, "<html>")
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer failing.Close()
	for _, c := range []struct {
		name, url, want string
		client          *http.Client
	}{
		{"refused", "http://us3r:pa55w0rd@" + refused + secretPart, "http://" + refused, nil},
		{"timeout", strings.Replace(slow.URL, "://", "://us3r:pa55w0rd@", 1) + secretPart, slow.URL, &http.Client{Timeout: 200 * time.Millisecond}},
		{"500", strings.Replace(failing.URL, "://", "://us3r:pa55w0rd@", 1) + secretPart, failing.URL, nil},
		{"not JSON", failing.URL + "/html?api_key=qu3ry-s3cret", failing.URL, nil},
		{"does not parse", "http://us3r:pa55w0rd@host:port" + secretPart, "not an http:// or https:// URL", nil},
		{"no scheme", "us3r:pa55w0rd@host" + secretPart, "not an http:// or https:// URL", nil},
	} {
		_, err := drain(t.Context(), reconcile.HTTP{URL: c.url, Client: c.client})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to name %s", c.name, err, c.want)
			continue
		}
		assertNoSecret(t, err, "us3r", "pa55w0rd", "p4th-s3cret", "qu3ry-s3cret", "hooks", "/html")
	}
}

func assertNoSecret(t *testing.T, err error, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(err.Error(), s) {
			t.Errorf("the error shows %q: %v", s, err)
		}
	}
}
