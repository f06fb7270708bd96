package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookgate/hookgate/internal/bolttest"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/boltqueue"
	"github.com/hookgate/hookgate/sender/httpapi"
)

// TestShowPrintsReceived: dlq show, deliveries show and deliveries
// export, against the admin API over a real queue, print what durable
// ingress kept of the request (source, path and headers) with the values
// redact_headers names masked, never the values themselves.
func TestShowPrintsReceived(t *testing.T) {
	const secret = "tok-9f8e7d6c"
	q, addr := svcAdmin(t)

	// Two envelopes as webhook_enqueue stores them: one dies after an
	// attempt, one is delivered.
	now := time.Now().UTC().Truncate(time.Second)
	for _, tc := range []struct {
		id   string
		kind sender.OutcomeKind
	}{{"dead-1", sender.Dead}, {"sent-1", sender.Delivered}} {
		e := &sender.Envelope{ID: tc.id, Destination: "svc", EventType: "push", Payload: []byte(`{}`),
			CreatedAt: now.Add(-time.Minute), NextAt: now.Add(-time.Minute),
			Received: &sender.Received{
				Source: "github",
				Path:   "/gh?org=acme",
				Header: http.Header{"X-Github-Event": {"push"}, "X-Some-Token": {secret}},
				Redact: []string{"X-Some-Token"},
			}}
		if _, err := q.Enqueue(t.Context(), e); err != nil {
			t.Fatal(err)
		}
		leased, err := q.Lease(t.Context(), "svc", 1, time.Now(), time.Minute)
		if err != nil || len(leased) != 1 {
			t.Fatalf("leased %d: %v", len(leased), err)
		}
		e = leased[0].Envelope
		e.Attempts, e.LastStatus = 1, 200
		if tc.kind == sender.Dead {
			e.LastStatus, e.Class, e.DeadAt = 400, sender.ClassHTTP4xx, now
		}
		e.Log = []sender.Attempt{{At: now, Status: e.LastStatus}}
		out := sender.Outcome{Kind: tc.kind, ID: tc.id, LeaseUntil: leased[0].LeaseUntil, Envelope: e}
		if _, err := q.Settle(t.Context(), "svc", []sender.Outcome{out}, now); err != nil {
			t.Fatal(err)
		}
	}

	want := map[string]any{
		"source":  "github",
		"path":    "/gh?org=acme",
		"headers": map[string]any{"X-Github-Event": []any{"push"}, "X-Some-Token": []any{sender.Redacted}},
	}
	for _, args := range [][]string{
		{"dlq", "show", "dead-1", "--destination", "svc", addr},
		{"deliveries", "show", "svc", "sent-1", addr},
		{"deliveries", "show", "svc", "dead-1", "--format", "json", addr},
	} {
		got := execute(t, "", args...)
		if got.code != 0 {
			t.Fatalf("%v: %+v", args, got)
		}
		if strings.Contains(got.stdout, secret) {
			t.Errorf("%v prints the redacted value:\n%s", args, got.stdout)
		}
		var v struct {
			Received map[string]any `json:"received"`
		}
		if err := json.Unmarshal([]byte(got.stdout), &v); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, got.stdout)
		}
		if diff := cmp.Diff(want, v.Received); diff != "" {
			t.Errorf("%v: received (-want +got):\n%s", args, diff)
		}
	}

	// The export: each line carries it too.
	got := execute(t, "", "deliveries", "export", addr)
	lines := strings.Split(strings.TrimSpace(got.stdout), "\n")
	if got.code != 0 || len(lines) != 2 || strings.Contains(got.stdout, secret) {
		t.Fatalf("deliveries export: %+v", got)
	}
	for _, line := range lines {
		var v struct {
			ID       string         `json:"id"`
			Received map[string]any `json:"received"`
		}
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if diff := cmp.Diff(want, v.Received); diff != "" {
			t.Errorf("export, %s: received (-want +got):\n%s", v.ID, diff)
		}
	}
}

// svcAdmin is the admin API over a bbolt queue of destination svc, whose
// history keeps payloads an hour: the queue, and the --address flag that
// reaches the API.
func svcAdmin(t *testing.T) (*boltqueue.Queue, string) {
	t.Helper()
	return adminOver(t, sender.Destination{Name: "svc", URL: "http://127.0.0.1:1/hooks"})
}

// adminOver is svcAdmin's, over the destinations dests.
func adminOver(t *testing.T, dests ...sender.Destination) (*boltqueue.Queue, string) {
	t.Helper()
	q, err := boltqueue.New(bolttest.Open(t, nil), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	q.KeepHistory(sender.History{Keep: time.Hour, Payload: time.Hour})
	s, err := sender.New(q, sender.Config{}, dests, sender.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ops := sender.NewOps(s, sender.NewSettled(q, s.Destinations, 10, nil), sender.OpsOptions{})
	admin := httptest.NewServer(httpapi.New(ops, nil, nil, nil))
	t.Cleanup(admin.Close)
	return q, "--address=" + strings.TrimPrefix(admin.URL, "http://")
}
