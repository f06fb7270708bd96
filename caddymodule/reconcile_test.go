package caddymodule

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/reconcile"
)

// TestRepairPathsAgree: the command's repairs (through the admin API) and
// a scheduled run's (through the sender in process) are one path and
// count alike. After a first run repaired two keys, the truth row of the
// first one is updated (its updated_at moved, its version did not): for
// either door that key is already repaired, no error, not counted; and an
// event one door enqueued is already repaired for the other.
func TestRepairPathsAgree(t *testing.T) {
	addr := freeAddr(t)
	rcv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer rcv.Close()
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	truth := []reconcile.Row{{Key: "r-1", State: "confirmed", Version: 1, UpdatedAt: at}, {Key: "r-2", State: "confirmed", Version: 1, UpdatedAt: at}}
	src := truthAPI(t, func() []reconcile.Row { mu.Lock(); defer mu.Unlock(); return truth })
	empty := truthAPI(t, func() []reconcile.Row { return nil })
	app := loadApp(t, addr, map[string]any{
		"destinations": []map[string]any{{"name": "enrollment", "url": rcv.URL, "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}},
	})
	job := &ReconcileJob{
		Name: "enrollments", Expect: map[string]string{"confirmed": "active"},
		Truth: &ReconcileSource{Kind: "http", URL: src.URL}, Receiver: &ReconcileSource{Kind: "http", URL: empty.URL},
		Repair: &ReconcileRepair{Destination: "enrollment", EventType: "reservation.{state}"},
	}
	admin, err := reconcile.NewAdminEnqueuer(addr, "enrollment")
	if err != nil {
		t.Fatal(err)
	}
	doors := map[string]reconcile.Enqueuer{"command": admin, "scheduled": reconcile.SenderEnqueuer{Sender: app, Destination: "enrollment"}}
	run := func(door string) string {
		t.Helper()
		r, rep, err := job.Job().Run(t.Context(), reconcile.RunOptions{Timeout: time.Minute, Enqueuer: doors[door]})
		if err != nil {
			t.Fatalf("%s: %v", door, err)
		}
		return fmt.Sprintf("missing %d, repaired %d, already %d", r.Drift[reconcile.Missing], rep.Repaired, rep.Already)
	}
	if got := run("command"); got != "missing 2, repaired 2, already 0" {
		t.Fatalf("the first run: %s", got)
	}
	mu.Lock()
	truth[0].UpdatedAt = at.Add(time.Hour)
	truth = append(truth, reconcile.Row{Key: "r-3", State: "confirmed", Version: 1, UpdatedAt: at})
	mu.Unlock()
	if got := run("scheduled"); got != "missing 3, repaired 1, already 2" {
		t.Errorf("scheduled, after the command: %s; want r-3 repaired, r-1 (moved) and r-2 already", got)
	}
	mu.Lock()
	truth[1].UpdatedAt = at.Add(time.Hour)
	mu.Unlock()
	for _, door := range []string{"command", "scheduled"} {
		if got := run(door); got != "missing 3, repaired 0, already 3" {
			t.Errorf("%s, once all were repaired: %s; want all three already", door, got)
		}
	}
}
