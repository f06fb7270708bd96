package caddymodule

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/trace"
)

// startSpan starts a child span of ctx's with hookgate's tracer from the
// span's provider: Caddy does not set a global provider, its tracing
// handler puts the span in the context. Without tracing (no span in
// ctx, so its provider is the no-op one) it returns ctx and its no-op span
// as they are: a no-op child would record nothing either, and would cost
// a context and a request copy per handler.
func startSpan(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.SpanContext().IsValid() && !parent.IsRecording() {
		return ctx, parent
	}
	return parent.TracerProvider().Tracer("github.com/hookgate/hookgate").Start(ctx, name, opts...)
}

// withContext is r.WithContext, without the copy when ctx is r's already.
func withContext(r *http.Request, ctx context.Context) *http.Request {
	if ctx == r.Context() {
		return r
	}
	return r.WithContext(ctx)
}
