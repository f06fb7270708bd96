package caddymodule

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/zap"

	"github.com/hookgate/hookgate/internal/telemetry"
	"github.com/hookgate/hookgate/verify"
)

// newTestVerify builds the handler as Provision would, minus the app.
func newTestVerify(t *testing.T, secret string) *Verify {
	t.Helper()
	v, err := verify.New("standard", []string{secret}, verify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := telemetry.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	return &Verify{Scheme: "standard", MaxBody: DefaultMaxBody, verifier: v, now: time.Now, metrics: m, logger: zap.NewNop()}
}

// TestVerifySpanAndPlaceholders checks the handler starts its span under
// the request's, sets the placeholders, and hands the body on unchanged.
func TestVerifySpanAndPlaceholders(t *testing.T) {
	const secret = "whsec_c2VjcmV0LWZvci10ZXN0cw=="
	h := newTestVerify(t, secret)
	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	ctx, parent := tp.Tracer("test").Start(context.Background(), "request")

	body := []byte(`{"reservation_id":"r-1","nested":{"k":"v"}}`)
	signer, _ := verify.New("standard", []string{secret}, verify.Options{})
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	req.Header = signer.Sign("msg_span", time.Now(), body)
	repl := caddy.NewReplacer()
	req = req.WithContext(context.WithValue(ctx, caddy.ReplacerCtxKey, repl))

	var got []byte
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		got, _ = io.ReadAll(r.Body)
		return nil
	})
	if err := h.ServeHTTP(httptest.NewRecorder(), req, next); err != nil {
		t.Fatal(err)
	}
	parent.End()
	if !bytes.Equal(got, body) {
		t.Errorf("next handler read %q, want %q", got, body)
	}
	for key, want := range map[string]string{
		"webhook.id":                  "msg_span",
		"webhook.scheme":              "standard",
		"webhook.json.reservation_id": "r-1",
		"webhook.json.nested.k":       "v",
		"webhook.json.absent":         "",
	} {
		if v, ok := repl.GetString(key); !ok || v != want {
			t.Errorf("{%s} = %q (known %v), want %q", key, v, ok, want)
		}
	}
	spans := recorder.Ended()
	var found bool
	for _, s := range spans {
		if s.Name() == "webhook_verify" {
			found = true
			if s.Parent().SpanID() != parent.SpanContext().SpanID() {
				t.Error("webhook_verify span is not a child of the request's span")
			}
		}
	}
	if !found {
		t.Errorf("no webhook_verify span among %d", len(spans))
	}
}
