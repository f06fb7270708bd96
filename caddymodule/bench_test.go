package caddymodule

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/dedupe/redisstore"
	"github.com/hookgate/hookgate/internal/redistest"
	"github.com/hookgate/hookgate/internal/store"
	"github.com/hookgate/hookgate/internal/telemetry"
	"github.com/hookgate/hookgate/verify"
)

// BenchmarkVerifyDedupeUnique is the receiver's hot path without the
// network to the client and the upstream: webhook_verify, then
// webhook_dedupe on a real Redis (claim, a stand-in upstream answering
// 200, record), every request a new delivery, 32 goroutines per CPU at
// once. It reports the Redis round trips (pipelines) per request.
func BenchmarkVerifyDedupeUnique(b *testing.B) {
	srv := redistest.Start(b)
	conn, err := store.Open(store.Config{Backend: "redis", URLs: []string{"redis://" + srv.Addr()}}, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Destruct() })
	m, err := telemetry.New(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Shutdown() })
	const secret = "whsec_c2VjcmV0LWZvci10ZXN0cw=="
	verifier, err := verify.New("standard", []string{secret}, verify.Options{})
	if err != nil {
		b.Fatal(err)
	}
	v := &Verify{Scheme: "standard", MaxBody: DefaultMaxBody, verifier: verifier, now: time.Now, metrics: m, logger: zap.NewNop()}
	is := store.NewLazy(func() (*store.Conn, error) { return conn, nil }, "bench", "redis", m.StoreOpDuration())
	d, err := dedupe.New(is, dedupe.Config{ReplayCache: -1})
	if err != nil {
		b.Fatal(err)
	}
	h := &Dedupe{deduper: d, now: time.Now, metrics: m, logger: zap.NewNop(), bufs: &sync.Pool{New: func() any { return new(bytes.Buffer) }}}
	upstream := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
		return nil
	})
	chain := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		return v.ServeHTTP(w, r, caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			return h.ServeHTTP(w, r, upstream)
		}))
	})
	body := bytes.Repeat([]byte("x"), 900)
	var seq atomic.Int64
	b.SetParallelism(32)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
			req.Header = verifier.Sign(fmt.Sprintf("msg_%d", seq.Add(1)), time.Now(), body)
			req = req.WithContext(context.WithValue(req.Context(), caddy.ReplacerCtxKey, caddy.NewReplacer()))
			w := httptest.NewRecorder()
			if err := chain.ServeHTTP(w, req); err != nil || w.Code != 200 {
				b.Fatalf("%d %v %s", w.Code, err, w.Body)
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(is.Unwrap().(*redisstore.Store).Stats().Pipelines)/float64(b.N), "trips/op")
}
