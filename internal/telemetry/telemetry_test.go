package telemetry

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
)

// TestResultCounters: the receiver's results are exported under their
// names, by label set, with the counts made; a series appears with its
// first count; counting allocates nothing once a label set is known.
func TestResultCounters(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	noop := trace.SpanFromContext(context.Background()) // no tracing
	for range 3 {
		m.Verified(noop, "standard", "accepted")
		m.DedupeResult(noop, "replayed")
	}
	m.Verified(noop, "standard", "bad_signature")
	m.Verified(noop, "github", "accepted")
	m.DedupeResult(noop, "forwarded")
	m.FreshnessResult(noop, "applied")
	want := map[string]float64{
		`hookgate_verify_requests_total{result="accepted",scheme="standard"}`:      3,
		`hookgate_verify_requests_total{result="bad_signature",scheme="standard"}`: 1,
		`hookgate_verify_requests_total{result="accepted",scheme="github"}`:        1,
		`hookgate_dedupe_requests_total{result="replayed"}`:                        3,
		`hookgate_dedupe_requests_total{result="forwarded"}`:                       1,
		`hookgate_freshness_total{result="applied"}`:                               1,
	}
	if diff := cmp.Diff(want, counters(t, reg)); diff != "" {
		t.Errorf("exported counters (-want +got):\n%s", diff)
	}
	if n := testing.AllocsPerRun(100, func() {
		m.Verified(noop, "standard", "accepted")
		m.DedupeResult(noop, "replayed")
		m.FreshnessResult(noop, "applied")
	}); n != 0 {
		t.Errorf("counting known results allocates %v times, want 0", n)
	}
	if got := counters(t, reg)[`hookgate_dedupe_requests_total{result="replayed"}`]; got != 3+101 {
		t.Errorf("replayed = %v after 104 counts", got)
	}
}

// counters returns every counter reg exports, by name and labels.
func counters(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetType().String() != "COUNTER" {
			t.Errorf("%s is a %s, want a counter", mf.GetName(), mf.GetType())
		}
		for _, mt := range mf.GetMetric() {
			name := mf.GetName() + "{"
			for i, l := range mt.GetLabel() {
				if i > 0 {
					name += ","
				}
				name += l.GetName() + `="` + l.GetValue() + `"`
			}
			got[name+"}"] = mt.GetCounter().GetValue()
		}
	}
	return got
}
