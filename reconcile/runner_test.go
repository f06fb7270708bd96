package reconcile

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestRunTimeout: --timeout bounds a run whose source hangs; the error
// says so, with what was compared.
func TestRunTimeout(t *testing.T) {
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer hang.Close()
	empty := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = fmt.Fprint(w, `{"items":[]}`) }))
	defer empty.Close()
	job := &Job{
		Name: "enrollments", Expect: map[string]string{"confirmed": "active"},
		Sources: func() (Source, Source, error) { return HTTP{URL: empty.URL}, HTTP{URL: hang.URL}, nil },
	}
	start := time.Now()
	_, _, err := job.Run(t.Context(), RunOptions{Timeout: 300 * time.Millisecond, Bound: "--timeout"})
	if !errors.Is(err, ErrRunTimeout) || !strings.Contains(err.Error(), "took longer than 300ms (--timeout)") {
		t.Errorf("err = %v, want the run's timeout", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the run took %s", took)
	}
}

// TestRunRepairs: with an Enqueuer, a run repairs the missing and
// mismatched keys through one Repairer, under the job's event type and
// the run's limit; without one, it repairs nothing.
func TestRunRepairs(t *testing.T) {
	truth := rows{row("a", "confirmed"), row("b", "confirmed"), row("c", "confirmed"), row("d", "confirmed")}
	receiver := rows{row("b", "pending"), row("z", "active")}
	job := &Job{
		Name: "enrollments", Expect: expect, EventType: "reservation.{state}",
		Sources: func() (Source, Source, error) { return truth, receiver, nil },
	}
	door := &doorFake{queued: map[string]string{}}
	r, rep, err := job.Run(t.Context(), RunOptions{Enqueuer: door, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[Kind]int{Missing: 3, Mismatched: 1, Orphaned: 1}, r.Drift); diff != "" {
		t.Errorf("drift (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"reconcile:a:confirmed:1", "reconcile:b:confirmed:1"}, door.calls); diff != "" {
		t.Errorf("enqueued (-want +got):\n%s", diff)
	}
	if rep.Repaired != 2 || !strings.Contains(door.queued["reconcile:a:confirmed:1"], `"type":"reservation.confirmed"`) {
		t.Errorf("repaired %d, payload %s", rep.Repaired, door.queued["reconcile:a:confirmed:1"])
	}
	if _, rep, err := job.Run(t.Context(), RunOptions{}); err != nil || rep != nil {
		t.Errorf("without an Enqueuer: repairer %v, err %v; want none", rep, err)
	}
}

// TestRunSourcesError: a job whose sources cannot be built fails the run
// with their error, unwrapped.
func TestRunSourcesError(t *testing.T) {
	want := errors.New("truth: postgres DSN: no such placeholder")
	job := &Job{Name: "j", Expect: expect, Sources: func() (Source, Source, error) { return nil, nil, want }}
	if _, _, err := job.Run(t.Context(), RunOptions{Timeout: time.Minute}); err != want {
		t.Errorf("err = %v, want %v", err, want)
	}
}

// TestRunGrace: rows updated within the job's grace (default 2m) are left
// out.
func TestRunGrace(t *testing.T) {
	recent := Row{Key: "a", State: "confirmed", Version: 1, UpdatedAt: time.Now().Add(-time.Minute)}
	job := &Job{Name: "j", Expect: expect, Sources: func() (Source, Source, error) { return rows{recent}, rows{}, nil }}
	for grace, want := range map[time.Duration]int{0: 0, 30 * time.Second: 1} {
		job.Grace = grace
		r, _, err := job.Run(t.Context(), RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Total() != want {
			t.Errorf("grace %s: %d drifts, want %d", grace, r.Total(), want)
		}
	}
}
