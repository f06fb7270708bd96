package sender_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookgate/hookgate/sender"
)

// TestOpsResend: the history reads through Ops; a resend that sends
// envelopes is counted and logged as a redrive is, a dry run neither.
func TestOpsResend(t *testing.T) {
	q := settledQueue(t, 3, time.Now().Add(-time.Hour))
	dests := []sender.Destination{{Name: "a", URL: "http://127.0.0.1:1/"}, {Name: "b", URL: "http://127.0.0.1:1/"}, {Name: "c", URL: "http://127.0.0.1:1/"}}
	s, err := sender.New(q, fast, dests, sender.Options{})
	if err != nil {
		t.Fatal(err)
	}
	logs := new(logLines)
	var counted []sender.Letter
	ops := sender.NewOps(s, sender.NewDLQ(q, s.Destinations(), 0, nil), sender.OpsOptions{
		Logger:   slog.New(logs),
		Redriven: func(_ context.Context, l []sender.Letter) { counted = append(counted, l...) },
	})
	page, next, err := ops.History(t.Context(), sender.HistoryQuery{Destination: "b"}, "", 10)
	if err != nil || next != "" || len(page) != 3 || page[0].ID != "b-002" {
		t.Fatalf("history of b: %d entries, next %q, %v", len(page), next, err)
	}
	hq := sender.HistoryQuery{Destination: "a", Entity: "seat:0"}
	if rd, err := ops.Resend(t.Context(), hq, 5, "ann", true); err != nil || rd.Matched != 2 || rd.ID != "" {
		t.Fatalf("dry run: %+v, %v", rd, err)
	}
	if got := logs.take(); len(got) != 0 || len(counted) != 0 {
		t.Fatalf("a dry run logged %v and counted %v", got, counted)
	}
	rd, err := ops.Resend(t.Context(), hq, 1, "ann", false)
	if err != nil || rd.Moved != 1 || rd.Kind != "resend" {
		t.Fatalf("resend: %+v, %v", rd, err)
	}
	if diff := cmp.Diff(rd.Letters, counted); diff != "" {
		t.Errorf("letters counted (-want +got):\n%s", diff)
	}
	want := []map[string]any{{"msg": "resend", "level": "INFO", "redrive_id": rd.ID, "matched": int64(2), "moved": int64(1), "by": "ann"}}
	if diff := cmp.Diff(want, logs.take()); diff != "" {
		t.Errorf("logged (-want +got):\n%s", diff)
	}
}
