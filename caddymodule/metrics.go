package caddymodule

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// metrics holds hookgate's OpenTelemetry instruments. They are exported
// through Caddy's Prometheus registry, which is new at each config load, so
// each load builds its own provider; names are exact (no suffixes added).
type metrics struct {
	provider       *sdkmetric.MeterProvider
	verifyRequests metric.Int64Counter
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
	return m, nil
}

func (m *metrics) shutdown() error {
	return m.provider.Shutdown(context.Background())
}
