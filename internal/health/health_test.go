package health

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// works is a probe that answers at once.
func works(context.Context) error { return nil }

// fails is a probe that fails at once.
func fails(context.Context) error { return errors.New("connection refused") }

// TestServeHTTP: the answer's status, body and headers for each state of
// the parts.
func TestServeHTTP(t *testing.T) {
	t.Parallel()
	off := func(context.Context) error { return ErrOff }
	for _, tc := range []struct {
		name          string
		store, sender Probe
		status        int
		body          string
	}{
		{"both work", works, works, 200, `{"status":"ok","store":"ok","sender":"ok"}`},
		{"no sender", works, nil, 200, `{"status":"ok","store":"ok","sender":"off"}`},
		{"sender off", works, off, 200, `{"status":"ok","store":"ok","sender":"off"}`},
		{"no store", nil, nil, 200, `{"status":"ok","store":"off","sender":"off"}`},
		{"store fails", fails, works, 503, `{"status":"unavailable","store":"unavailable","sender":"ok"}`},
		{"store fails, no sender", fails, nil, 503, `{"status":"unavailable","store":"unavailable","sender":"off"}`},
		{"sender stopped", works, fails, 503, `{"status":"unavailable","store":"ok","sender":"unavailable"}`},
		{"both fail", fails, fails, 503, `{"status":"unavailable","store":"unavailable","sender":"unavailable"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := &Checker{Store: tc.store, Sender: tc.sender}
			w := httptest.NewRecorder()
			c.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/healthz", nil))
			if w.Code != tc.status {
				t.Errorf("status %d, want %d", w.Code, tc.status)
			}
			if got := strings.TrimSpace(w.Body.String()); got != tc.body {
				t.Errorf("body %s, want %s", got, tc.body)
			}
			want := http.Header{"Content-Type": {"application/json"}, "Cache-Control": {"no-store"}, "Content-Length": {strconv.Itoa(w.Body.Len())}}
			if diff := cmp.Diff(want, w.Header()); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMethods: GET and HEAD are answered, other methods refused.
func TestMethods(t *testing.T) {
	t.Parallel()
	c := &Checker{Store: works}
	for method, want := range map[string]int{"GET": 200, "HEAD": 200, "POST": 405, "DELETE": 405} {
		w := httptest.NewRecorder()
		c.ServeHTTP(w, httptest.NewRequest(method, "/healthz", nil))
		if w.Code != want {
			t.Errorf("%s: %d, want %d", method, w.Code, want)
		}
		if want == 405 && (w.Header().Get("Allow") != "GET, HEAD" || !strings.Contains(w.Body.String(), `"reason":"method_not_allowed"`)) {
			t.Errorf("%s: Allow %q, body %s", method, w.Header().Get("Allow"), w.Body)
		}
	}
}

// TestStoreTimeout: a store that does not answer is unavailable after
// the timeout, even when its probe ignores the context; the answer comes
// within the timeout.
func TestStoreTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		want    time.Duration
	}{
		{"default", 0, time.Second},
		{"set", 200 * time.Millisecond, 200 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				release := make(chan struct{})
				stuck := func(context.Context) error { <-release; return nil } // ignores its context
				c := &Checker{Store: stuck, Sender: works, Timeout: tc.timeout}
				start := time.Now()
				got := c.Check(t.Context())
				if took := time.Since(start); took != tc.want {
					t.Errorf("answered after %s, want %s", took, tc.want)
				}
				if diff := cmp.Diff(Report{Status: Unavailable, Store: Unavailable, Sender: OK}, got); diff != "" {
					t.Errorf("report (-want +got):\n%s", diff)
				}
				close(release)
			})
		})
	}
}

// TestNoCache: each Check after a probe has finished probes again, so an
// outage shows in the first answer after it, and a recovery too.
func TestNoCache(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	var probes atomic.Int32
	c := &Checker{Store: func(context.Context) error {
		probes.Add(1)
		if down.Load() {
			return errors.New("down")
		}
		return nil
	}}
	for i, d := range []bool{false, true, true, false} {
		down.Store(d)
		if got := c.Check(t.Context()).Ready(); got == d {
			t.Errorf("check %d: ready %v with the store down=%v", i, got, d)
		}
	}
	if n := probes.Load(); n != 4 {
		t.Errorf("%d probes for 4 checks", n)
	}
}

// TestConcurrentChecksShareAProbe: checks that arrive while a probe is in
// flight wait for it, and all get its answer.
func TestConcurrentChecksShareAProbe(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var probes atomic.Int32
		c := &Checker{Store: func(ctx context.Context) error {
			probes.Add(1)
			time.Sleep(100 * time.Millisecond)
			return nil
		}}
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				if r := c.Check(t.Context()); !r.Ready() {
					t.Errorf("not ready: %+v", r)
				}
			})
		}
		wg.Wait()
		if n := probes.Load(); n != 1 {
			t.Errorf("%d probes for 10 concurrent checks, want 1", n)
		}
	})
}

// TestCallerGone: a caller whose context ends stops waiting; the probe
// goes on for the others.
func TestCallerGone(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &Checker{Store: func(ctx context.Context) error { time.Sleep(500 * time.Millisecond); return nil }}
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		done := make(chan Report)
		go func() { done <- c.Check(t.Context()) }()
		if r := c.Check(ctx); r.Ready() {
			t.Errorf("gone caller: %+v", r)
		}
		if r := <-done; !r.Ready() {
			t.Errorf("patient caller: %+v", r)
		}
	})
}

// TestLogsChanges: a part that starts failing is logged once, with its
// error, however many checks fail; its recovery once.
func TestLogsChanges(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	var down atomic.Bool
	c := &Checker{
		Store: func(context.Context) error {
			if down.Load() {
				return errors.New("dial tcp 127.0.0.1:6379: connection refused")
			}
			return nil
		},
		Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}})),
	}
	for _, d := range []bool{false, true, true, true, false, false} {
		down.Store(d)
		c.Check(t.Context())
	}
	want := `level=WARN msg="readiness: store unavailable: answering 503 until it works again" part=store error="dial tcp 127.0.0.1:6379: connection refused"
level=INFO msg="readiness: store works again" part=store
`
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
}
