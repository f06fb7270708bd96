package forward

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	"github.com/hookgate/hookgate/internal/problem"
)

// handlerFunc makes a function a Handler.
type handlerFunc func(http.ResponseWriter, *http.Request) error

func (f handlerFunc) ServeHTTP(w http.ResponseWriter, r *http.Request) error { return f(w, r) }

// outcome is what a test compares of a Result.
type outcome struct {
	Status              int
	Body                string
	NotFinal, Truncated bool
	ClientLeft          bool
}

func outcomeOf(res *Result) outcome {
	return outcome{
		Status:     res.Status,
		Body:       string(res.Body),
		NotFinal:   res.NotFinal,
		Truncated:  res.Truncated,
		ClientLeft: res.ClientErr != nil,
	}
}

// send runs Send with a lease of 30s from now and returns the outcome
// settle saw, what Send panicked with, if it did, and Send's error.
func send(t *testing.T, w http.ResponseWriter, r *http.Request, c Config, next handlerFunc) (got outcome, panicked any, err error) {
	t.Helper()
	if c.Lease == 0 {
		c.Lease = 30 * time.Second
		c.LeaseUntil = time.Now().Add(c.Lease)
	}
	settled := 0
	defer func() {
		panicked = recover()
		if settled != 1 {
			t.Errorf("settle ran %d times, want once", settled)
		}
	}()
	err = Send(w, r, next, c, func(_ context.Context, res *Result) {
		settled++
		got = outcomeOf(res)
	})
	return got, nil, err
}

func reasonOf(t *testing.T, rec *httptest.ResponseRecorder) string {
	t.Helper()
	var d problem.Details
	if err := json.Unmarshal(rec.Body.Bytes(), &d); err != nil {
		t.Fatalf("answer %d %q is not a problem: %v", rec.Code, rec.Body, err)
	}
	return d.Reason
}

// TestSendAnswersAfterSettle: a buffered answer reaches the client only
// after the outcome is settled, whole, and settle sees the status, the
// body and the headers the upstream set (not those set before).
func TestSendAnswersAfterSettle(t *testing.T) {
	t.Parallel()
	client := httptest.NewRecorder()
	client.Header().Set("Server", "hookgate")
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("{}"))
	lease := 30 * time.Second
	c := Config{LeaseUntil: time.Now().Add(lease), Lease: lease, Buffer: new(bytes.Buffer), MaxRecord: 64}
	err := Send(client, r, handlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("X-Upstream", "yes")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "created")
		return nil
	}), c, func(_ context.Context, res *Result) {
		want := outcome{Status: http.StatusCreated, Body: "created"}
		if diff := cmp.Diff(want, outcomeOf(res)); diff != "" {
			t.Errorf("outcome (-want +got):\n%s", diff)
		}
		after, before := res.Headers()
		if diff := cmp.Diff(http.Header{"Server": {"hookgate"}, "X-Upstream": {"yes"}}, after); diff != "" {
			t.Errorf("Headers() after (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(http.Header{"Server": {"hookgate"}}, before); diff != "" {
			t.Errorf("Headers() before (-want +got):\n%s", diff)
		}
		if client.Code != http.StatusOK || client.Body.Len() != 0 {
			t.Errorf("the client got %d %q before the outcome was settled", client.Code, client.Body)
		}
	})
	if err != nil {
		t.Fatalf("Send = %v", err)
	}
	if client.Code != http.StatusCreated || client.Body.String() != "created" {
		t.Errorf("client got %d %q, want 201 \"created\"", client.Code, client.Body)
	}
}

// TestSendClientGone: a client that left (its context canceled, its
// writes failing) does not stop the forward: the handler below runs under
// a live context, its writes succeed, the upstream's answer is taken to
// its end, and settle learns the client left.
func TestSendClientGone(t *testing.T) {
	t.Parallel()
	for _, buffered := range []bool{false, true} {
		t.Run("buffered="+strconv.FormatBool(buffered), func(t *testing.T) {
			t.Parallel()
			type key struct{}
			ctx, cancel := context.WithCancel(context.WithValue(t.Context(), key{}, "kept"))
			r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/", strings.NewReader("{}"))
			client := &failingWriter{ResponseRecorder: httptest.NewRecorder()}
			c := Config{}
			if buffered {
				c = Config{Buffer: new(bytes.Buffer), MaxRecord: 8}
			}
			chunks := 0
			got, panicked, err := send(t, client, r, c, func(w http.ResponseWriter, r *http.Request) error {
				cancel() // the client hangs up mid-forward
				w.WriteHeader(http.StatusOK)
				for range 4 {
					if r.Context().Err() != nil {
						return r.Context().Err()
					}
					if _, err := io.WriteString(w, "chunk"); err != nil {
						return err
					}
					chunks++
				}
				if r.Context().Value(key{}) != "kept" {
					t.Error("the forward lost the request's values")
				}
				return nil
			})
			if err != nil || panicked != nil {
				t.Fatalf("Send = %v, panic %v", err, panicked)
			}
			if chunks != 4 {
				t.Errorf("the upstream's answer was read to chunk %d of 4", chunks)
			}
			// Buffered past MaxRecord (8), the body streamed: the first
			// write to the client failed and the rest were discarded.
			want := outcome{Status: http.StatusOK, Truncated: true, ClientLeft: true}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("outcome (-want +got):\n%s", diff)
			}
			if client.writes != 1 {
				t.Errorf("%d writes reached the client, want 1", client.writes)
			}
		})
	}
}

// TestSendPanicBelow: a panic below is settled first, then answered: with
// http.ErrAbortHandler, a problem when nothing went to the client yet
// (the upstream's headers dropped, those set before kept), else the
// connection aborts; any other panic is raised again.
func TestSendPanicBelow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		c         Config
		next      handlerFunc
		want      outcome
		wantPanic any
		reason    string // the problem the client gets, when no panic
	}{
		{
			name: "abort before the status",
			c:    Config{Buffer: new(bytes.Buffer), MaxRecord: 64},
			next: func(w http.ResponseWriter, r *http.Request) error {
				w.Header().Set("X-Upstream", "yes")
				panic(http.ErrAbortHandler)
			},
			want:   outcome{Truncated: true},
			reason: "upstream_response_incomplete",
		},
		{
			name: "abort mid-body, buffered",
			c:    Config{Buffer: new(bytes.Buffer), MaxRecord: 64},
			next: func(w http.ResponseWriter, r *http.Request) error {
				w.Header().Set("X-Upstream", "yes")
				_, _ = io.WriteString(w, "part")
				panic(http.ErrAbortHandler)
			},
			want:   outcome{Status: http.StatusOK, Body: "part", Truncated: true},
			reason: "upstream_response_incomplete",
		},
		{
			name: "abort mid-body, streamed",
			next: func(w http.ResponseWriter, r *http.Request) error {
				_, _ = io.WriteString(w, "part")
				panic(http.ErrAbortHandler)
			},
			want:      outcome{Status: http.StatusOK, Truncated: true},
			wantPanic: http.ErrAbortHandler,
		},
		{
			name: "another panic",
			c:    Config{Buffer: new(bytes.Buffer), MaxRecord: 64},
			next: func(w http.ResponseWriter, r *http.Request) error {
				w.WriteHeader(http.StatusAccepted)
				panic("boom")
			},
			want:      outcome{Status: http.StatusAccepted, Truncated: true},
			wantPanic: "boom",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			client := httptest.NewRecorder()
			client.Header().Set("Server", "hookgate")
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("{}"))
			got, panicked, err := send(t, client, r, tt.c, tt.next)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("outcome (-want +got):\n%s", diff)
			}
			if err != nil || panicked != tt.wantPanic {
				t.Fatalf("Send = %v, panic %v; want nil, panic %v", err, panicked, tt.wantPanic)
			}
			if tt.wantPanic != nil {
				return
			}
			if client.Code != http.StatusBadGateway || reasonOf(t, client) != tt.reason {
				t.Errorf("client got %d %s, want 502 %s", client.Code, client.Body, tt.reason)
			}
			if got := client.Header().Get("X-Upstream"); got != "" {
				t.Errorf("the answer carries the upstream's header X-Upstream: %q", got)
			}
			if got := client.Header().Get("Server"); got != "hookgate" {
				t.Errorf("Server = %q, want the header set before the forward", got)
			}
		})
	}
}

// TestSendOverTheRecordLimit: an answer over MaxRecord streams to the
// client whole and in order, and settle sees it truncated; one that fits
// is buffered whole.
func TestSendOverTheRecordLimit(t *testing.T) {
	t.Parallel()
	const limit = 10
	tests := []struct {
		name          string
		contentLength string
		chunks        []string
		want          outcome
		streamedFirst bool // the status went out before the settle
	}{
		{name: "fits", chunks: []string{"0123", "456789"}, want: outcome{Status: 201, Body: "0123456789"}},
		{name: "grows past the limit", chunks: []string{"0123", "456789", "x"}, want: outcome{Status: 201, Truncated: true}, streamedFirst: true},
		{name: "declares more than the limit", contentLength: "11", chunks: []string{"0123", "4567890"}, want: outcome{Status: 201, Truncated: true}, streamedFirst: true},
		{name: "declares the limit", contentLength: "10", chunks: []string{"01234", "56789"}, want: outcome{Status: 201, Body: "0123456789"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			client := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("{}"))
			lease := 30 * time.Second
			c := Config{LeaseUntil: time.Now().Add(lease), Lease: lease, Buffer: new(bytes.Buffer), MaxRecord: limit}
			err := Send(client, r, handlerFunc(func(w http.ResponseWriter, r *http.Request) error {
				if tt.contentLength != "" {
					w.Header().Set("Content-Length", tt.contentLength)
				}
				w.WriteHeader(201)
				for _, c := range tt.chunks {
					_, _ = io.WriteString(w, c)
				}
				return nil
			}), c, func(_ context.Context, res *Result) {
				if diff := cmp.Diff(tt.want, outcomeOf(res)); diff != "" {
					t.Errorf("outcome (-want +got):\n%s", diff)
				}
				if sent := client.Code == 201; sent != tt.streamedFirst {
					t.Errorf("status sent before the settle: %v, want %v", sent, tt.streamedFirst)
				}
			})
			if err != nil {
				t.Fatalf("Send = %v", err)
			}
			if want := strings.Join(tt.chunks, ""); client.Code != 201 || client.Body.String() != want {
				t.Errorf("client got %d %q, want 201 %q", client.Code, client.Body, want)
			}
		})
	}
}

// TestSendDeadlines: the forward ends a tenth of the lease (at most a
// second) before the lease; its outcome is settled under a context the
// forward's deadline does not end, until the lease ends or for
// minSettle, whichever is later.
func TestSendDeadlines(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		lease  time.Duration
		margin time.Duration
	}{
		{"30s lease", 30 * time.Second, time.Second},
		{"5s lease", 5 * time.Second, 500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				until := start.Add(tt.lease)
				r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("{}"))
				client := httptest.NewRecorder()
				c := Config{LeaseUntil: until, Lease: tt.lease, Buffer: new(bytes.Buffer), MaxRecord: 64}
				err := Send(client, r, handlerFunc(func(w http.ResponseWriter, r *http.Request) error {
					if d, ok := r.Context().Deadline(); !ok || !d.Equal(until.Add(-tt.margin)) {
						t.Errorf("forward deadline %v (set %v), want the lease's end less %v", d.Sub(start), ok, tt.margin)
					}
					// A slow upstream: the forward runs out of time.
					<-r.Context().Done()
					return r.Context().Err()
				}), c, func(ctx context.Context, res *Result) {
					if res.Status != 0 || !res.Truncated {
						t.Errorf("status %d, truncated %v; want 0 and truncated", res.Status, res.Truncated)
					}
					if _, ok := ctx.Deadline(); ok || ctx.Err() != nil {
						t.Errorf("settle's context ends: %v", ctx.Err())
					}
					if got, want := time.Since(start), tt.lease-tt.margin; got != want {
						t.Errorf("the forward ended after %v, want %v", got, want)
					}
					// The lease ends within the margin: settle still gets
					// minSettle.
					if got, want := res.SettleDeadline(), time.Now().Add(minSettle); !got.Equal(want) {
						t.Errorf("SettleDeadline = %v from now, want %v", time.Until(got), minSettle)
					}
				})
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Send = %v, want the forward's deadline", err)
				}
				if client.Code != http.StatusOK || client.Body.Len() != 0 {
					t.Errorf("the client got %d %q; the error is the caller's to answer", client.Code, client.Body)
				}
			})
		})
	}
}

// TestSendTimeoutAbort: a copy aborted because the forward's deadline
// passed is answered 504 upstream_timeout.
func TestSendTimeoutAbort(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		lease := 10 * time.Second
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("{}"))
		client := httptest.NewRecorder()
		c := Config{LeaseUntil: time.Now().Add(lease), Lease: lease}
		got, panicked, err := send(t, client, r, c, func(w http.ResponseWriter, r *http.Request) error {
			<-r.Context().Done()
			panic(http.ErrAbortHandler)
		})
		if diff := cmp.Diff(outcome{Truncated: true}, got); diff != "" {
			t.Errorf("outcome (-want +got):\n%s", diff)
		}
		if err != nil || panicked != nil {
			t.Fatalf("Send = %v, panic %v", err, panicked)
		}
		if client.Code != http.StatusGatewayTimeout || reasonOf(t, client) != "upstream_timeout" {
			t.Errorf("client got %d %s, want 504 upstream_timeout", client.Code, client.Body)
		}
	})
}

func TestSettleDeadline(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		until, want time.Time
	}{
		{now.Add(time.Minute), now.Add(time.Minute)},     // the lease holds: its end
		{now.Add(minSettle), now.Add(minSettle)},         // equal: the lease's end
		{now.Add(time.Second), now.Add(minSettle)},       // ends too soon: minSettle
		{now.Add(-time.Hour), now.Add(minSettle)},        // over: minSettle still
		{now.Add(minSettle + 1), now.Add(minSettle + 1)}, // just past the floor
	}
	for _, tt := range tests {
		if got := settleDeadline(now, tt.until); !got.Equal(tt.want) {
			t.Errorf("settleDeadline(now, now%+v) = now%+v, want now%+v", tt.until.Sub(now), got.Sub(now), tt.want.Sub(now))
		}
	}
}

// TestSendError: next's error is returned for the caller to answer; the
// buffered answer is not written, and the outcome is truncated.
func TestSendError(t *testing.T) {
	t.Parallel()
	client := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("{}"))
	boom := errors.New("upstream down")
	got, panicked, err := send(t, client, r, Config{Buffer: new(bytes.Buffer), MaxRecord: 64}, func(w http.ResponseWriter, r *http.Request) error {
		return boom
	})
	if diff := cmp.Diff(outcome{Truncated: true}, got); diff != "" {
		t.Errorf("outcome (-want +got):\n%s", diff)
	}
	if err != boom || panicked != nil {
		t.Fatalf("Send = %v, panic %v; want %v", err, panicked, boom)
	}
	if client.Code != http.StatusOK || client.Body.Len() != 0 {
		t.Errorf("the client got %d %q", client.Code, client.Body)
	}
}

// TestSendOneShot: the request the handler below gets is one Go's
// transport never resends on its own.
func TestSendOneShot(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		body       string
		header     http.Header
		wantHeader http.Header
	}{
		{
			name:       "a body",
			body:       "{}",
			header:     http.Header{"Idempotency-Key": {"k"}},
			wantHeader: http.Header{"Idempotency-Key": {"k"}},
		},
		{
			name:       "no body",
			header:     http.Header{"Idempotency-Key": {"k"}, "X-Idempotency-Key": {"x"}, "Other": {"o"}},
			wantHeader: http.Header{"idempotency-key": {"k"}, "x-idempotency-key": {"x"}, "Other": {"o"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tt.body))
			r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(tt.body)), nil }
			r.Header = tt.header
			// Only what next sees is checked here.
			_, _, _ = send(t, httptest.NewRecorder(), r, Config{}, func(w http.ResponseWriter, r *http.Request) error {
				if r.GetBody != nil {
					t.Error("the forwarded request's body can be had again (GetBody)")
				}
				if diff := cmp.Diff(tt.wantHeader, r.Header); diff != "" {
					t.Errorf("forwarded header (-want +got):\n%s", diff)
				}
				return nil
			})
		})
	}
}

// wrapper wraps a writer as Caddy's handlers do (caddyhttp.
// ResponseWriterWrapper): it unwraps.
type wrapper struct{ http.ResponseWriter }

func (w wrapper) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TestMarkNotFinal: a mark reaches the nearest enclosing forward that
// records (one with a Buffer), through the writers of the handlers in
// between and any forward that does not record, and nothing else.
func TestMarkNotFinal(t *testing.T) {
	t.Parallel()
	marking := func(w http.ResponseWriter, r *http.Request) error {
		MarkNotFinal(w)
		w.WriteHeader(http.StatusConflict)
		return nil
	}
	// nested forwards marking below: inner runs inside outer.
	nested := func(inner Config, innerRes *outcome) handlerFunc {
		return func(w http.ResponseWriter, r *http.Request) error {
			inner.Lease = 30 * time.Second
			inner.LeaseUntil = time.Now().Add(inner.Lease)
			return Send(w, r, handlerFunc(marking), inner, func(_ context.Context, res *Result) { *innerRes = outcomeOf(res) })
		}
	}
	recording := func() Config { return Config{Buffer: new(bytes.Buffer), MaxRecord: 64} }

	t.Run("recording", func(t *testing.T) {
		t.Parallel()
		got, _, _ := send(t, httptest.NewRecorder(), httptest.NewRequest("POST", "/", nil), recording(), marking)
		if !got.NotFinal {
			t.Error("the mark did not reach the forward")
		}
	})
	t.Run("not recording", func(t *testing.T) {
		t.Parallel()
		got, _, _ := send(t, httptest.NewRecorder(), httptest.NewRequest("POST", "/", nil), Config{}, marking)
		if got.NotFinal {
			t.Error("a forward that does not record reports a mark")
		}
	})
	t.Run("through wrapping writers", func(t *testing.T) {
		t.Parallel()
		// Two handlers in between wrap the writer, as encode or a
		// deferred header does between webhook_dedupe and
		// webhook_freshness.
		wrapped := func(w http.ResponseWriter, r *http.Request) error {
			return marking(wrapper{wrapper{w}}, r)
		}
		got, _, _ := send(t, httptest.NewRecorder(), httptest.NewRequest("POST", "/", nil), recording(), wrapped)
		if !got.NotFinal {
			t.Error("the mark did not reach the forward through the wrapping writers")
		}
		if got.Status != http.StatusConflict {
			t.Errorf("status %d, want 409", got.Status)
		}
	})
	t.Run("through the tracing handler", func(t *testing.T) {
		t.Parallel()
		// Caddy's tracing directive runs the handlers below it inside
		// otelhttp's handler, which hands them a writer of its own.
		traced := func(w http.ResponseWriter, r *http.Request) error {
			var err error
			otelhttp.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				err = marking(w, r)
			}), "webhook").ServeHTTP(w, r)
			return err
		}
		got, _, _ := send(t, httptest.NewRecorder(), httptest.NewRequest("POST", "/", nil), recording(), traced)
		if !got.NotFinal {
			t.Error("the mark did not reach the forward through the tracing handler's writer")
		}
	})
	t.Run("a streamed answer", func(t *testing.T) {
		t.Parallel()
		// Past MaxRecord the body streams; the mark still reaches the
		// forward, which records the outcome without its body.
		long := func(w http.ResponseWriter, r *http.Request) error {
			MarkNotFinal(wrapper{w})
			_, err := w.Write(bytes.Repeat([]byte("x"), 100))
			return err
		}
		got, _, _ := send(t, httptest.NewRecorder(), httptest.NewRequest("POST", "/", nil), recording(), long)
		if !got.NotFinal || !got.Truncated {
			t.Errorf("NotFinal %v, Truncated %v; want both", got.NotFinal, got.Truncated)
		}
	})
	t.Run("through a forward that does not record", func(t *testing.T) {
		t.Parallel()
		var inner outcome
		got, _, _ := send(t, httptest.NewRecorder(), httptest.NewRequest("POST", "/", nil), recording(), nested(Config{}, &inner))
		if !got.NotFinal || inner.NotFinal {
			t.Errorf("outer NotFinal %v, inner %v; want true, false", got.NotFinal, inner.NotFinal)
		}
	})
	t.Run("the nearest recording forward", func(t *testing.T) {
		t.Parallel()
		var inner outcome
		got, _, _ := send(t, httptest.NewRecorder(), httptest.NewRequest("POST", "/", nil), recording(), nested(recording(), &inner))
		if got.NotFinal || !inner.NotFinal {
			t.Errorf("outer NotFinal %v, inner %v; want false, true", got.NotFinal, inner.NotFinal)
		}
	})
	t.Run("no forward", func(t *testing.T) {
		t.Parallel()
		MarkNotFinal(wrapper{httptest.NewRecorder()}) // nothing to mark: no panic
	})
}
