package store

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/sender"
)

// TestRedisOptions: one URL is a single node, several a Cluster, several
// with a master name Sentinels; credentials come from the first URL, and
// no error quotes a credential.
func TestRedisOptions(t *testing.T) {
	o, err := RedisOptions([]string{"redis://u:pw@a:1/2", "redis://b:1"}, "")
	if err != nil || !o.IsClusterMode || o.Password != "pw" || o.Username != "u" || o.DB != 2 || len(o.Addrs) != 2 {
		t.Fatalf("cluster: %+v %v", o, err)
	}
	if o, _ := RedisOptions([]string{"redis://a:1", "redis://b:1"}, "m"); o.IsClusterMode || o.MasterName != "m" {
		t.Errorf("sentinels: %+v", o)
	}
	for _, raw := range []string{"redis://:s3cr3t-pw%zz@h:1", "redis://:s3cr3t-pw@h:1/0/1", "redis://:pw@h:1/0?dial_timeout=s3cr3t-pw", "http://s3cr3t-pw@h:1"} {
		_, err := RedisOptions([]string{raw}, "")
		if err == nil || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%s: %v", raw, err)
		}
	}
}

// TestLazyOpensOnFirstUse: nothing is opened before the first call; the
// file store opens then, and each timed operation is recorded.
func TestLazyOpensOnFirstUse(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	hist, err := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("t").Float64Histogram("d")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	opened := 0
	l := NewLazy(func() (*Conn, error) {
		opened++
		return Open(Config{Backend: "file", Dir: dir}, slog.New(slog.DiscardHandler))
	}, "p", "file", hist)
	if opened != 0 {
		t.Fatal("opened before first use")
	}
	ctx := context.Background()
	res, err := l.Claim(ctx, "k", dedupe.Claim{Token: "t", Lease: time.Minute, Retention: time.Hour, Now: time.Now()})
	if err != nil || res.Status != dedupe.Claimed {
		t.Fatalf("claim: %+v %v", res, err)
	}
	if _, err := l.Forget(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	c, _ := l.Conn()
	defer func() { _ = c.Destruct() }()
	if opened != 1 {
		t.Errorf("opened %d times", opened)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	h := rm.ScopeMetrics[0].Metrics[0].Data.(metricdata.Histogram[float64])
	if len(h.DataPoints) != 1 || h.DataPoints[0].Count != 1 {
		t.Errorf("recorded %+v, want one claim (forget is not timed)", h.DataPoints)
	}
}

// TestOpenUnknownBackend names the backend.
func TestOpenUnknownBackend(t *testing.T) {
	if _, err := Open(Config{Backend: "etcd"}, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), `"etcd"`) {
		t.Errorf("got %v", err)
	}
}

// TestQueueKeepsHistory: the file store's queue keeps what settled as the
// configuration says: here its entry, and no payload.
func TestQueueKeepsHistory(t *testing.T) {
	ctx := t.Context()
	c, err := Open(Config{Backend: "file", Dir: t.TempDir()}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destruct() })
	q, err := c.Queue("p", time.Hour, sender.History{Keep: time.Hour, Payload: 0})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := q.Enqueue(ctx, &sender.Envelope{ID: "e1", Destination: "d", Payload: []byte(`{}`), CreatedAt: now, NextAt: now}); err != nil {
		t.Fatal(err)
	}
	leased, err := q.Lease(ctx, "d", 1, now, time.Minute)
	if err != nil || len(leased) != 1 {
		t.Fatalf("Lease = %v, %v", leased, err)
	}
	out := sender.Outcome{Kind: sender.Delivered, ID: "e1", LeaseUntil: leased[0].LeaseUntil, Envelope: leased[0].Envelope}
	if _, err := q.Settle(ctx, "d", []sender.Outcome{out}, now); err != nil {
		t.Fatal(err)
	}
	e, state, err := q.Get(ctx, "d", "e1")
	if err != nil || state != sender.StateDelivered || !e.PayloadExpired || e.Payload != nil {
		t.Errorf("Get = %+v, %s, %v; want delivered, its payload not kept", e, state, err)
	}
}

// TestConfigCheckMinReplicas: min_replicas is a Redis store's, and not
// negative.
func TestConfigCheckMinReplicas(t *testing.T) {
	for _, tt := range []struct {
		cfg  Config
		want string
	}{
		{Config{Backend: "redis", URLs: []string{"redis://h"}, MinReplicas: 1}, ""},
		{Config{Backend: "redis", URLs: []string{"redis://h"}, MinReplicas: 1, ReplicaTimeout: time.Second}, ""},
		{Config{Backend: "redis", URLs: []string{"redis://h"}, MinReplicas: -1}, "min_replicas wants"},
		{Config{Backend: "redis", URLs: []string{"redis://h"}, MinReplicas: 1, ReplicaTimeout: 2 * time.Second}, "min_replicas timeout 2s: at most 1s"},
		{Config{Backend: "file", Dir: "d", MinReplicas: 1}, "min_replicas is a Redis store's"},
	} {
		err := tt.cfg.Check()
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%+v: %v; want %q", tt.cfg, err, tt.want)
		}
	}
}
