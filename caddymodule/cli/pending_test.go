package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/httpapi"
)

// TestDeliveriesListQueued: deliveries list --state queued, against the
// admin API over a real queue, prints the envelopes waiting for a service
// that is down (in flight first, then by when due) and none that
// settled; full, it says where to count them all; export writes them as
// JSON Lines; --since is refused.
func TestDeliveriesListQueued(t *testing.T) {
	q, addr := svcAdmin(t)

	now := time.Now().UTC().Truncate(time.Second)
	enqueue := func(id string, next time.Time) {
		t.Helper()
		e := &sender.Envelope{ID: id, Destination: "svc", EventType: "push", Payload: []byte(`{}`),
			CreatedAt: now.Add(-time.Hour), NextAt: next}
		if _, err := q.Enqueue(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	// One delivered, then one in flight, one retry due later (its
	// attempt answered 503), and two due now.
	enqueue("sent-1", now.Add(-2*time.Hour))
	enqueue("retry-1", now.Add(-90*time.Minute))
	leased, err := q.Lease(t.Context(), "svc", 2, time.Now(), time.Minute)
	if err != nil || len(leased) != 2 {
		t.Fatalf("leased %d: %v", len(leased), err)
	}
	retry := *leased[1].Envelope
	retry.Attempts, retry.LastStatus, retry.NextAt = 1, 503, now.Add(time.Hour)
	retry.Log = []sender.Attempt{{At: now, Status: 503}}
	if _, err := q.Settle(t.Context(), "svc", []sender.Outcome{
		{Kind: sender.Delivered, ID: "sent-1", LeaseUntil: leased[0].LeaseUntil, Envelope: leased[0].Envelope},
		{Kind: sender.Retry, ID: "retry-1", LeaseUntil: leased[1].LeaseUntil, Envelope: &retry},
	}, now); err != nil {
		t.Fatal(err)
	}
	enqueue("flight-1", now.Add(-time.Hour))
	if l, err := q.Lease(t.Context(), "svc", 1, time.Now(), time.Minute); err != nil || len(l) != 1 || l[0].ID != "flight-1" {
		t.Fatalf("leased %v, %v; want flight-1", l, err)
	}
	enqueue("ev-1", now.Add(-30*time.Minute))
	enqueue("ev-2", now.Add(-20*time.Minute))

	got := execute(t, "", "deliveries", "list", "--state", "queued", addr)
	if got.code != 0 {
		t.Fatalf("deliveries list --state queued: %+v", got)
	}
	var listed []string
	for _, line := range strings.Split(strings.TrimSpace(got.stdout), "\n")[1:] {
		f := strings.Fields(line)
		listed = append(listed, f[0]+" "+f[4]+" "+f[5]+" "+f[6])
	}
	want := []string{"flight-1 leased 0 0", "ev-1 queued 0 0", "ev-2 queued 0 0", "retry-1 queued 503 1"}
	if strings.Join(listed, ",") != strings.Join(want, ",") {
		t.Errorf("deliveries list --state queued printed\n%s\nwant the rows %q", got.stdout, want)
	}
	if !strings.Contains(got.stdout, "CREATED AT") || strings.Contains(got.stdout, "counts them all") {
		t.Errorf("a list that is not full:\n%s", got.stdout)
	}

	got = execute(t, "", "deliveries", "list", "--state", "queued", "--limit", "2", addr)
	if got.code != 0 || !strings.Contains(got.stdout, "the first 2 due; 'hookgate destinations' counts them all") ||
		strings.Contains(got.stdout, "ev-2") {
		t.Errorf("a full list:\n%+v", got)
	}

	got = execute(t, "", "deliveries", "export", "--state", "queued", addr)
	lines := strings.Split(strings.TrimSpace(got.stdout), "\n")
	if got.code != 0 || len(lines) != 4 {
		t.Fatalf("deliveries export --state queued: %+v", got)
	}
	var first httpapi.DeliveryEntry
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || first.ID != "flight-1" || first.State != sender.StateLeased {
		t.Errorf("the export's first line %s (%v), want flight-1 leased", lines[0], err)
	}

	got = execute(t, "", "deliveries", "list", "--state", "queued", "--since", now.Format(time.RFC3339), addr)
	if got.code != 1 || !strings.Contains(got.stderr, "since and until bound when an envelope settled") {
		t.Errorf("--since with --state queued: %+v", got)
	}
}

// TestDeliveriesListHeldBehind: over a real queue, an ordered destination
// whose entity's head died under on_dead hold: deliveries list --state
// queued says which head each waits behind, held, and destinations list
// counts them.
func TestDeliveriesListHeldBehind(t *testing.T) {
	q, addr := adminOver(t, sender.Destination{Name: "ledger", URL: "http://127.0.0.1:1/ledger", Ordering: sender.Ordering{ByEntity: true, Hold: true}})
	for _, id := range []string{"l-1", "l-2"} {
		if _, err := q.Enqueue(t.Context(), &sender.Envelope{ID: id, Destination: "ledger", Entity: "acct-7", Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	leased, err := q.Lease(t.Context(), "ledger", 10, time.Now(), time.Minute)
	if err != nil || len(leased) != 1 {
		t.Fatalf("leased %d, %v; want the head alone", len(leased), err)
	}
	e := *leased[0].Envelope
	e.Attempts, e.LastStatus, e.Class, e.DeadAt = 1, 422, sender.ClassHTTP4xx, time.Now()
	if _, err := q.Settle(t.Context(), "ledger", []sender.Outcome{{Kind: sender.Dead, ID: e.ID, LeaseUntil: leased[0].LeaseUntil, Envelope: &e}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	got := execute(t, "", "deliveries", "list", "--state", "queued", addr)
	if got.code != 0 || !strings.Contains(got.stdout, "queued, held behind l-1") {
		t.Errorf("deliveries list --state queued: %+v; want l-2 queued, held behind l-1", got)
	}
	got = execute(t, "", "destinations", "list", addr)
	rows := strings.Split(strings.TrimSpace(got.stdout), "\n")
	if got.code != 0 || len(rows) != 2 || !strings.Contains(rows[0], "WAITING  HELD") || strings.Join(strings.Fields(rows[1])[4:11], " ") != "entity/hold 1 0 0 1 1 1" {
		t.Errorf("destinations list: %+v; want ledger ordered, on_dead hold, with 1 queued, 1 dead, 1 waiting, 1 held", got)
	}
}
