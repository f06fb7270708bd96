package caddymodule

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/attribute"

	"github.com/prometheus/client_golang/prometheus"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// metrics holds hookgate's OpenTelemetry instruments. They are exported
// through Caddy's Prometheus registry, which is new at each config load, so
// each load builds its own provider; names are exact (no suffixes added).
type metrics struct {
	provider        *sdkmetric.MeterProvider
	verifyRequests  metric.Int64Counter
	dedupeRequests  metric.Int64Counter
	storeOpDuration metric.Float64Histogram
	freshness       metric.Int64Counter
	dedupeAttrs     sync.Map // result -> []metric.AddOption, built once
	freshnessAttrs  sync.Map
	sender          *senderMetrics
	reconcile       *reconcileMetrics
}

func newMetrics(reg *prometheus.Registry) (*metrics, error) {
	exporter, err := otelprom.New(
		otelprom.WithRegisterer(reg),
		otelprom.WithoutScopeInfo(),
		otelprom.WithoutTargetInfo(),
		otelprom.WithoutUnits(),
		otelprom.WithoutCounterSuffixes(),
	)
	if err != nil {
		return nil, err
	}
	m := &metrics{provider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))}
	meter := m.provider.Meter("github.com/hookgate/hookgate")
	m.verifyRequests, err = meter.Int64Counter("hookgate_verify_requests_total",
		metric.WithDescription("Webhook verifications by scheme and result."))
	if err != nil {
		return nil, err
	}
	m.dedupeRequests, err = meter.Int64Counter("hookgate_dedupe_requests_total",
		metric.WithDescription("Dedupe outcomes: forwarded, replayed, in_flight, mismatch, store_error, lease_expired, and the 400 and 413 reasons."))
	if err != nil {
		return nil, err
	}
	m.freshness, err = meter.Int64Counter("hookgate_freshness_total",
		metric.WithDescription("Freshness outcomes: applied, not_applied, superseded, too_old, entity_busy, store_error, and the 400 reasons."))
	if err != nil {
		return nil, err
	}
	m.storeOpDuration, err = meter.Float64Histogram("hookgate_store_op_duration_seconds",
		metric.WithDescription("Latency of state store operations by backend and operation."),
		metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5))
	if err != nil {
		return nil, err
	}
	if m.sender, err = newSenderMetrics(meter); err != nil {
		return nil, err
	}
	if m.reconcile, err = newReconcileMetrics(meter); err != nil {
		return nil, err
	}
	return m, nil
}

// dedupeResult counts one webhook_dedupe outcome.
func (m *metrics) dedupeResult(ctx context.Context, result string) {
	countResult(ctx, m.dedupeRequests, &m.dedupeAttrs, result)
}

// freshnessResult counts one webhook_freshness outcome.
func (m *metrics) freshnessResult(ctx context.Context, result string) {
	countResult(ctx, m.freshness, &m.freshnessAttrs, result)
}

// countResult adds one to counter with a result label; the results are
// fixed codes, so the attribute sets are built once each.
func countResult(ctx context.Context, counter metric.Int64Counter, cache *sync.Map, result string) {
	opts, ok := cache.Load(result)
	if !ok {
		// A slice, so that Add's variadic argument is not an allocation.
		opts, _ = cache.LoadOrStore(result, []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("result", result)))})
	}
	counter.Add(ctx, 1, opts.([]metric.AddOption)...)
}

func (m *metrics) shutdown() error {
	return m.provider.Shutdown(context.Background())
}
