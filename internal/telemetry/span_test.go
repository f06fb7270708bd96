package telemetry

import (
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestStartSpan: without a span in the context, StartSpan returns the
// context as it is (no copy, no span); under a span, a child of it from
// the span's own provider, which SpanResult labels with the result.
func TestStartSpan(t *testing.T) {
	ctx := t.Context()
	if got, span := StartSpan(ctx, "webhook_verify"); got != ctx || span.SpanContext().IsValid() {
		t.Error("without tracing, StartSpan made a context or a span")
	}

	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	ctx, parent := tp.Tracer("test").Start(ctx, "request")
	cctx, child := StartSpan(ctx, "webhook_verify")
	if trace.SpanFromContext(cctx) != child {
		t.Error("the child span is not the context's")
	}
	SpanResult(child, "accepted")
	child.End()
	parent.End()
	spans := recorder.Ended()
	if len(spans) != 2 || spans[0].Name() != "webhook_verify" || spans[0].Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Fatalf("spans %v: want webhook_verify, a child of request", spans)
	}
	if attrs := spans[0].Attributes(); len(attrs) != 1 || attrs[0] != attribute.String("hookgate.result", "accepted") {
		t.Errorf("attributes %v, want hookgate.result=accepted (SpanResult)", attrs)
	}
	if got := spans[0].InstrumentationScope().Name; got != "github.com/hookgate/hookgate" {
		t.Errorf("tracer %q, want github.com/hookgate/hookgate", got)
	}
}
