package caddymodule

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/cputime"
	"github.com/hookgate/hookgate/internal/outage"
	"github.com/hookgate/hookgate/internal/redistest"
	"github.com/hookgate/hookgate/internal/store"
	"github.com/hookgate/hookgate/internal/telemetry"
	"github.com/hookgate/hookgate/verify"
)

// The allocation budgets of the receiver's paths: what the handlers
// allocate per request on top of what Caddy and net/http allocate for any
// request (the request, its replacer, the response writer), counted with
// testing.AllocsPerRun against a writer that allocates nothing. A change
// that goes over one fails the path's benchmark (go test -run '^$' -bench
// 'Replay|Forward|VerifyOnly' ./caddymodule); the numbers are deterministic,
// unlike times. Each budget is what the path costs now: lower it when a
// change takes an allocation away.
const (
	// verify alone: the body buffer, the request carrying it, its
	// placeholders, the delivery's ID and timestamp placeholders.
	budgetVerifyOnly = 21
	// verify, then a duplicate replayed from the replay cache.
	budgetReplayHit = 20
	// verify, then a new delivery claimed, forwarded (to a stand-in that
	// writes a small JSON answer), recorded and answered, on an in-memory
	// store that allocates nothing itself.
	budgetForwardUnique = 44
)

const benchSecret = "whsec_c2VjcmV0LWZvci10ZXN0cw=="

// benchBody is the load generator's body: 1 KiB of signed JSON.
var benchBody = append(append([]byte(`{"type":"reservation.confirmed","reservation_id":"r-1","pad":"`), bytes.Repeat([]byte("x"), 900)...), `"}`...)

// benchUpstream is the stand-in receiver: a small JSON answer.
var benchUpstream = caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"enrolled":true}`))
	return nil
})

// benchRespond is Caddy's own `respond` with the upstream's answer: the
// limit of a replay, an answer from memory.
var benchRespond = caddyhttp.StaticResponse{StatusCode: "200", Body: `{"enrolled":true}`}

// newBenchMetrics returns the instruments on a registry of their own.
func newBenchMetrics(b *testing.B) *telemetry.Metrics {
	m, err := telemetry.New(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Shutdown() })
	return m
}

// newBenchVerify returns a provisioned webhook_verify of the standard
// scheme, and its verifier to sign with.
func newBenchVerify(b *testing.B, m *telemetry.Metrics) (*Verify, *verify.Verifier) {
	verifier, err := verify.New("standard", []string{benchSecret}, verify.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return &Verify{Scheme: "standard", MaxBody: DefaultMaxBody, verifier: verifier, now: time.Now, metrics: m, logger: zap.NewNop()}, verifier
}

// newBenchDedupe returns a provisioned webhook_dedupe over st.
func newBenchDedupe(b *testing.B, m *telemetry.Metrics, st dedupe.Store, replayCache int) *Dedupe {
	d, err := dedupe.New(st, dedupe.Config{ReplayCache: replayCache})
	if err != nil {
		b.Fatal(err)
	}
	return &Dedupe{deduper: d, now: time.Now, metrics: m, logger: zap.NewNop(), storeLog: outage.NewLog(zap.NewNop(), "dedupe", time.Now),
		bufs: &sync.Pool{New: func() any { return new(bytes.Buffer) }}}
}

// chain is handlers in a route's order, the last one's next a 404.
func chain(hs ...caddyhttp.MiddlewareHandler) caddyhttp.Handler {
	var next caddyhttp.Handler = caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		return caddyhttp.Error(http.StatusNotFound, nil)
	})
	for i := len(hs) - 1; i >= 0; i-- {
		h, below := hs[i], next
		next = caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			return h.ServeHTTP(w, r, below)
		})
	}
	return next
}

// terminal makes a handler that never calls next a middleware handler.
type terminal struct{ caddyhttp.Handler }

func (t terminal) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	return t.Handler.ServeHTTP(w, r)
}

// benchWriter is a response writer that keeps the status and discards the
// body, and allocates nothing itself: its header map is cleared, not
// made, for each request, so what a path allocates is counted alone.
type benchWriter struct {
	h      http.Header
	status int
	n      int
}

func newBenchWriter() *benchWriter { return &benchWriter{h: make(http.Header, 8)} }

func (w *benchWriter) reset() *benchWriter {
	clear(w.h)
	w.status, w.n = 0, 0
	return w
}

func (w *benchWriter) Header() http.Header { return w.h }

func (w *benchWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *benchWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.n += len(p)
	return len(p), nil
}

// benchRequests makes the requests of a path, as Caddy hands them to the
// first handler: a request with its replacer in the context.
type benchRequests struct {
	url    *url.URL
	header http.Header // signed once (dup), or nil: signed per request
	signer *verify.Verifier
	seq    atomic.Int64
	prefix string
}

func newBenchRequests(signer *verify.Verifier, dupID string) *benchRequests {
	u, _ := url.Parse("http://127.0.0.1/hooks")
	q := &benchRequests{url: u, signer: signer, prefix: fmt.Sprintf("msg_%d_", time.Now().UnixNano())}
	if dupID != "" {
		q.header = signer.Sign(dupID, time.Now(), benchBody)
		q.header.Set("Content-Type", "application/json")
	}
	return q
}

// next returns a new request: a duplicate of the one delivery, or a new
// delivery.
func (q *benchRequests) next() *http.Request {
	h := q.header
	if h == nil {
		h = q.signer.Sign(q.prefix+fmt.Sprint(q.seq.Add(1)), time.Now(), benchBody)
		h.Set("Content-Type", "application/json")
	}
	r := &http.Request{
		Method: http.MethodPost, URL: q.url, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(bytes.NewReader(benchBody)), ContentLength: int64(len(benchBody)),
		Host: q.url.Host, RemoteAddr: "127.0.0.1:40000", RequestURI: q.url.RequestURI(),
	}
	return r.WithContext(context.WithValue(context.Background(), caddy.ReplacerCtxKey, caddy.NewReplacer()))
}

// serve runs h on a request of q and fails unless it answers want.
func serve(b *testing.B, h caddyhttp.Handler, q *benchRequests, w *benchWriter, want int) {
	if err := h.ServeHTTP(w.reset(), q.next()); err != nil || w.status != want {
		b.Fatalf("got %d %v, want %d", w.status, err, want)
	}
}

// pathAllocs is what h allocates per request of q, beyond making the
// request: the allocations of making and serving one, less those of
// making one.
func pathAllocs(b *testing.B, h caddyhttp.Handler, q *benchRequests, want int) float64 {
	w := newBenchWriter()
	serve(b, h, q, w, want) // warm: caches, pools, metric series
	made := testing.AllocsPerRun(200, func() { _ = q.next() })
	all := testing.AllocsPerRun(200, func() { serve(b, h, q, w, want) })
	return all - made
}

// checkBudget reports a path's allocations per request and fails the
// benchmark when they are over budget.
// (Reported after the loop: b.Loop drops the metrics reported before it.)
func checkBudget(b *testing.B, path string, allocs float64, budget int) (report func()) {
	b.Helper()
	if allocs > float64(budget) {
		b.Fatalf("%s allocates %.0f times per request, over its budget of %d", path, allocs, budget)
	}
	return func() { b.ReportMetric(allocs, "path_allocs/op") }
}

// BenchmarkVerifyOnly is webhook_verify in front of the stand-in upstream:
// the allocations verify adds to every path.
func BenchmarkVerifyOnly(b *testing.B) {
	m := newBenchMetrics(b)
	v, signer := newBenchVerify(b, m)
	h := chain(v, terminal{benchUpstream})
	q := newBenchRequests(signer, "msg_verify")
	report := checkBudget(b, "verify", pathAllocs(b, h, q, http.StatusOK), budgetVerifyOnly)
	w := newBenchWriter()
	b.ReportAllocs()
	for b.Loop() {
		serve(b, h, q, w, http.StatusOK)
	}
	report()
}

// BenchmarkReplay is a duplicate answered from the replay cache (verify,
// then webhook_dedupe's replay) beside Caddy's own `respond`, alone and
// behind verify: run one after another in chunks on one thread and timed
// by the thread's CPU clock, so a busy machine slows all alike.
// x_respond is the replay's CPU per request over respond's; x_verify_respond
// over verify + respond's: what dedupe's replay costs beyond a static
// answer (1.0 would be nothing). The replay's allocations beyond the
// request are held to budgetReplayHit.
func BenchmarkReplay(b *testing.B) {
	m := newBenchMetrics(b)
	v, signer := newBenchVerify(b, m)
	d := newBenchDedupe(b, m, newMemStore(), 0)
	replay := chain(v, d, terminal{benchUpstream})
	respond := chain(benchRespond)
	verifyRespond := chain(v, benchRespond)
	q := newBenchRequests(signer, "msg_dup")
	serve(b, replay, q, newBenchWriter(), http.StatusOK) // the first copy: forwarded and recorded
	allocs := pathAllocs(b, replay, q, http.StatusOK)

	b.Run("hit", func(b *testing.B) {
		report := checkBudget(b, "replay hit", allocs, budgetReplayHit)
		w := newBenchWriter()
		b.ReportAllocs()
		for b.Loop() {
			serve(b, replay, q, w, http.StatusOK)
		}
		report()
	})
	b.Run("ratio", func(b *testing.B) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		w := newBenchWriter()
		const chunk = 64
		var tReplay, tRespond, tVerify time.Duration
		for b.Loop() {
			t0 := cputime.Thread(b)
			for range chunk {
				serve(b, respond, q, w, http.StatusOK)
			}
			t1 := cputime.Thread(b)
			for range chunk {
				serve(b, replay, q, w, http.StatusOK)
			}
			t2 := cputime.Thread(b)
			for range chunk {
				serve(b, verifyRespond, q, w, http.StatusOK)
			}
			t3 := cputime.Thread(b)
			tRespond += t1 - t0
			tReplay += t2 - t1
			tVerify += t3 - t2
		}
		b.ReportMetric(float64(tReplay)/float64(tRespond), "x_respond")
		b.ReportMetric(float64(tReplay)/float64(tVerify), "x_verify_respond")
		b.ReportMetric(float64(tReplay)/float64(b.N*chunk), "replay_cpu_ns/req")
	})
}

// BenchmarkForwardUnique is a new delivery on each request: verify, then
// webhook_dedupe claims it, forwards it to the stand-in upstream, records
// the answer and answers the client. On "mem", an in-memory store whose
// only allocation is the new key's entry, its allocations beyond the request are held
// to budgetForwardUnique; "embedded" is the bbolt file (fsync on), 32
// goroutines per CPU at once.
func BenchmarkForwardUnique(b *testing.B) {
	m := newBenchMetrics(b)
	v, signer := newBenchVerify(b, m)
	unique := chain(v, newBenchDedupe(b, m, &memStore{entries: map[string]*memEntry{}, forget: true}, -1), terminal{benchUpstream})
	b.Run("mem", func(b *testing.B) {
		q := newBenchRequests(signer, "")
		report := checkBudget(b, "unique forward", pathAllocs(b, unique, q, http.StatusOK), budgetForwardUnique)
		w := newBenchWriter()
		b.ReportAllocs()
		for b.Loop() {
			serve(b, unique, q, w, http.StatusOK)
		}
		report()
	})
	// The CPU per request of the unique forward on "mem", and of verify
	// alone in front of the same upstream, over Caddy's `respond`'s (a
	// yardstick no change here moves): x_respond and verify_x_respond;
	// x_verify is the first over the second (1.0 would be a dedupe that
	// costs nothing). Interleaved as in BenchmarkReplay; the requests are
	// made (and signed) outside the timed chunks.
	b.Run("mem-ratio", func(b *testing.B) {
		verifyOnly := chain(v, terminal{benchUpstream})
		respond := chain(benchRespond)
		q := newBenchRequests(signer, "")
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		w := newBenchWriter()
		const chunk = 64
		reqs := make([]*http.Request, chunk)
		timed := func(h caddyhttp.Handler) time.Duration {
			for i := range reqs {
				reqs[i] = q.next()
			}
			t0 := cputime.Thread(b)
			for _, r := range reqs {
				if err := h.ServeHTTP(w.reset(), r); err != nil || w.status != http.StatusOK {
					b.Fatalf("%d %v", w.status, err)
				}
			}
			return cputime.Thread(b) - t0
		}
		var tUnique, tVerify, tRespond time.Duration
		for b.Loop() {
			tRespond += timed(respond)
			tUnique += timed(unique)
			tVerify += timed(verifyOnly)
		}
		b.ReportMetric(float64(tUnique)/float64(tVerify), "x_verify")
		b.ReportMetric(float64(tUnique)/float64(tRespond), "x_respond")
		b.ReportMetric(float64(tVerify)/float64(tRespond), "verify_x_respond")
	})
	b.Run("embedded", func(b *testing.B) {
		conn, err := store.Open(store.Config{Backend: "file", Dir: b.TempDir()}, slog.New(slog.DiscardHandler))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = conn.Destruct() })
		st := store.NewLazy(func() (*store.Conn, error) { return conn, nil }, "bench", "file", m.StoreOpDuration())
		h := chain(v, newBenchDedupe(b, m, st, -1), terminal{benchUpstream})
		q := newBenchRequests(signer, "")
		b.SetParallelism(32)
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			w := newBenchWriter()
			for pb.Next() {
				serve(b, h, q, w, http.StatusOK)
			}
		})
	})
}

// memStore is an in-memory dedupe.Store for the handler benchmarks: a map
// under a lock, made with room for the keys a budget's count makes, so
// that a new key costs its entry and nothing else (no map growth midway).
type memStore struct {
	mu      sync.Mutex
	entries map[string]*memEntry
	// forget drops each record once written, as if it had expired: a
	// benchmark of new deliveries then runs on a heap that does not grow,
	// and its profile shows the requests' garbage, not the store's.
	forget bool
}

type memEntry struct {
	fp         dedupe.Fingerprint
	token      string
	leaseUntil time.Time
	rec        *dedupe.Record
	expires    time.Time
}

func newMemStore() *memStore { return &memStore{entries: make(map[string]*memEntry, 1024)} }

func (s *memStore) Claim(_ context.Context, key string, c dedupe.Claim) (dedupe.ClaimResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[key]
	switch {
	case ok && !c.Now.Before(e.expires):
		ok = false
	case ok && e.fp != c.Fingerprint:
		return dedupe.ClaimResult{Status: dedupe.Mismatch}, nil
	case ok && e.rec != nil:
		return dedupe.ClaimResult{Status: dedupe.Recorded, Record: e.rec, Expires: e.expires}, nil
	case ok && c.Now.Before(e.leaseUntil):
		return dedupe.ClaimResult{Status: dedupe.InFlight, LeaseUntil: e.leaseUntil}, nil
	}
	status := dedupe.Claimed
	if ok {
		status = dedupe.TookOver
	}
	s.entries[key] = &memEntry{fp: c.Fingerprint, token: c.Token, leaseUntil: c.Now.Add(c.Lease), expires: c.Now.Add(c.Retention)}
	return dedupe.ClaimResult{Status: status}, nil
}

func (s *memStore) Record(_ context.Context, key, token string, rec dedupe.Record, retention time.Duration, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[key]
	if !ok || e.token != token || e.rec != nil {
		return dedupe.ErrClaimLost
	}
	if s.forget {
		delete(s.entries, key)
		return nil
	}
	e.rec, e.expires = &rec, now.Add(retention)
	return nil
}

func (s *memStore) Release(_ context.Context, key, token string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.entries[key]; ok && e.token == token && e.rec == nil {
		delete(s.entries, key)
	}
	return nil
}

func (s *memStore) Get(_ context.Context, key string, now time.Time) (dedupe.Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[key]
	switch {
	case !ok || !now.Before(e.expires):
		return dedupe.Entry{}, nil
	case e.rec != nil:
		return dedupe.Entry{State: dedupe.StateRecorded, Fingerprint: e.fp, Record: e.rec, Expires: e.expires}, nil
	}
	return dedupe.Entry{State: dedupe.StateClaimed, Fingerprint: e.fp, LeaseUntil: e.leaseUntil, Expires: e.expires}, nil
}

func (s *memStore) Forget(_ context.Context, key string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.entries[key]
	delete(s.entries, key)
	return ok, nil
}

// BenchmarkVerifyDedupeUnique is the receiver's hot path without the
// network to the client and the upstream: webhook_verify, then
// webhook_dedupe on a real Redis (claim, a stand-in upstream answering
// 200, record), every request a new delivery, 32 goroutines per CPU at
// once. (dedupe/redisstore's BenchmarkDeduperUnique reports the round
// trips per request.)
func BenchmarkVerifyDedupeUnique(b *testing.B) {
	srv := redistest.Start(b)
	conn, err := store.Open(store.Config{Backend: "redis", URLs: []string{"redis://" + srv.Addr()}}, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Destruct() })
	m := newBenchMetrics(b)
	v, verifier := newBenchVerify(b, m)
	is := store.NewLazy(func() (*store.Conn, error) { return conn, nil }, "bench", "redis", m.StoreOpDuration())
	h := chain(v, newBenchDedupe(b, m, is, -1), terminal{benchUpstream})
	var seq atomic.Int64
	b.SetParallelism(32)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(benchBody))
			req.Header = verifier.Sign(fmt.Sprintf("msg_%d", seq.Add(1)), time.Now(), benchBody)
			req = req.WithContext(context.WithValue(req.Context(), caddy.ReplacerCtxKey, caddy.NewReplacer()))
			w := httptest.NewRecorder()
			if err := h.ServeHTTP(w, req); err != nil || w.Code != 200 {
				b.Fatalf("%d %v %s", w.Code, err, w.Body)
			}
		}
	})
}
