package store

import (
	"log/slog"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/hookgate/hookgate/dedupe"
)

// TestClaimsNamespace: a console token's claim and a reconcile slot's are
// not counted as webhook claims: the latency of each is labelled with its
// namespace, and the webhooks' with "webhook". Their keys are the ones
// stored before namespaces, which no webhook's key meets.
func TestClaimsNamespace(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	hist, err := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("t").Float64Histogram("d")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	l := NewLazy(func() (*Conn, error) {
		return Open(Config{Backend: "file", Dir: dir}, slog.New(slog.DiscardHandler))
	}, "p", "file", hist)
	ctx := t.Context()
	claim := dedupe.Claim{Token: "t", Lease: time.Minute, Retention: time.Hour, Now: time.Now()}
	if _, err := l.Claim(ctx, "k", claim); err != nil {
		t.Fatal(err)
	}
	c, _ := l.Conn()
	defer func() { _ = c.Destruct() }()
	if _, err := l.Claims("console").Claim(ctx, "tok", claim); err != nil {
		t.Fatal(err)
	}
	if err := l.Claims("console").Release(ctx, "tok", "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Claims("reconcile").Claim(ctx, "job/1", claim); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]dedupe.EntryState{
		"\x00reconcile/job/1": dedupe.StateClaimed,
		"tok":                 dedupe.Absent, // the console's token is not a webhook's key
		"job/1":               dedupe.Absent,
	} {
		if e, err := l.Get(ctx, key, time.Now()); err != nil || e.State != want {
			t.Errorf("Get(%q): %v %v, want %v", key, e.State, err, want)
		}
	}
	if _, err := l.Claims("console").Claim(ctx, "tok2", claim); err != nil {
		t.Fatal(err)
	}
	if e, err := l.Get(ctx, "hookgate-console-confirm:tok2", time.Now()); err != nil || e.State != dedupe.StateClaimed {
		t.Errorf("the console's token is not under its key of before: %v %v", e.State, err)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, p := range rm.ScopeMetrics[0].Metrics[0].Data.(metricdata.Histogram[float64]).DataPoints {
		ns, _ := p.Attributes.Value(attribute.Key("namespace"))
		op, _ := p.Attributes.Value(attribute.Key("op"))
		got[ns.AsString()+" "+op.AsString()] += p.Count
	}
	want := map[string]uint64{"webhook claim": 1, "console claim": 2, "console release": 1, "reconcile claim": 1, "webhook get": 4 /* the test's lookups */}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: %d calls counted, want %d (all: %v)", k, got[k], n, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("counted %v, want %v", got, want)
	}
}
