package queuetest

// Durable ingress (issue 31): what an envelope keeps of the request it
// was received as (sender.Received) is stored with its payload, and
// comes back byte-identical wherever the envelope goes: a lease, a retry,
// the dead letters and a redrive, the history and a resend, a rename.

import (
	"net/http"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/hookgate/hookgate/sender"
)

// received is an envelope of dest as webhook_enqueue makes one: its body,
// and the request's kept headers, path and scheme.
func received(dest, id string, at time.Time) *sender.Envelope {
	e := env(dest, id, at)
	e.Received = &sender.Received{
		Source: "github",
		Path:   "/hooks/github?install=" + id,
		Header: http.Header{
			"X-Github-Event":    {"push"},
			"X-Github-Delivery": {id},
			"X-Repeated":        {"one", "", "three \x7f"},
		},
		Redact: []string{"X-Github-Delivery"},
	}
	return e
}

func runReceived(t *testing.T, newQueue NewQueue) {
	// same checks that got holds want's body and Received, unchanged.
	same := func(t *testing.T, where string, got, want *sender.Envelope) {
		t.Helper()
		if string(got.Payload) != string(want.Payload) || !reflect.DeepEqual(got.Received, want.Received) {
			t.Errorf("%s: payload %q, received %+v; want %q, %+v", where, got.Payload, got.Received, want.Payload, want.Received)
		}
	}

	t.Run("ReceivedRoundTrips", func(t *testing.T) {
		t.Parallel()
		q := withHistory(t, newQueue, sender.History{Keep: retention, Payload: retention})
		want := received("d", "r1", t0)
		mustEnqueue(t, q, want, queued)

		// The same ID and body, other headers (a provider's retry
		// carries new timestamps): a duplicate. Another body: a mismatch.
		retry := received("d", "r1", t0.Add(time.Second))
		retry.Received.Header.Set("X-Github-Event", "ping")
		mustEnqueue(t, q, retry, sender.EnqueueResult{State: sender.StateQueued, Duplicate: true})
		other := received("d", "r1", t0)
		other.Payload = []byte(`{"other":true}`)
		mustEnqueue(t, q, other, sender.EnqueueResult{State: sender.StateQueued, Duplicate: true, Mismatch: true})

		ms, err := q.Metas(t.Context(), "d", []string{"r1"})
		if err != nil || len(ms) != 1 || ms[0].Size != len(want.Payload) || ms[0].Fingerprint != sender.PayloadFingerprint(want.Payload) {
			t.Fatalf("Metas(r1) = %+v, %v: the size and fingerprint are the body's", ms, err)
		}
		if got, _, err := q.Get(t.Context(), "d", "r1"); err != nil {
			t.Fatal(err)
		} else {
			same(t, "Get", got, want)
		}

		// A lease, then a retry: settled with the envelope as leased.
		l := mustLease(t, q, "d", 1, t0)
		if len(l) != 1 {
			t.Fatalf("leased %d", len(l))
		}
		same(t, "Lease", l[0].Envelope, want)
		settleLeased(t, q, "d", l, sender.Retry, t0)
		settle(t, q, "d", t0, sender.Dead, 400, "r1")
		if got, st, err := q.Get(t.Context(), "d", "r1"); err != nil || st != sender.StateDead {
			t.Fatalf("Get after the dead settle: %v, %v", st, err)
		} else {
			same(t, "Get of the dead letter", got, want)
		}

		// A redrive, then a delivery: the history keeps it, a resend
		// sends it again.
		if moved, err := q.Redrive(t.Context(), "d", []string{"r1"}, "rd-1", t0.Add(time.Minute)); err != nil || len(moved) != 1 {
			t.Fatalf("Redrive = %v, %v", moved, err)
		}
		l = mustLease(t, q, "d", 1, t0.Add(time.Minute))
		if len(l) != 1 {
			t.Fatalf("leased %d after the redrive", len(l))
		}
		same(t, "Lease after the redrive", l[0].Envelope, want)
		settleLeased(t, q, "d", l, sender.Delivered, t0.Add(time.Minute))
		if got, st, err := q.Get(t.Context(), "d", "r1"); err != nil || st != sender.StateDelivered {
			t.Fatalf("Get of the delivered one: %v, %v", st, err)
		} else {
			same(t, "Get from the history", got, want)
		}
		if moved, err := q.Resend(t.Context(), "d", []string{"r1"}, "rs-1", t0.Add(2*time.Minute)); err != nil || len(moved) != 1 {
			t.Fatalf("Resend = %v, %v", moved, err)
		}
		l = mustLease(t, q, "d", 1, t0.Add(2*time.Minute))
		if len(l) != 1 {
			t.Fatalf("leased %d after the resend", len(l))
		}
		same(t, "Lease after the resend", l[0].Envelope, want)
	})

	t.Run("ReceivedMoves", func(t *testing.T) {
		t.Parallel()
		q := withHistory(t, newQueue, sender.History{Keep: retention, Payload: retention})
		done, dead, waiting := received("old", "s", t0), received("old", "x", t0.Add(time.Second)), received("old", "q", t0.Add(time.Hour))
		for _, e := range []*sender.Envelope{done, dead, waiting} {
			mustEnqueue(t, q, e, queued)
		}
		settle(t, q, "old", t0, sender.Delivered, 200, "s")
		settle(t, q, "old", t0.Add(time.Second), sender.Dead, 400, "x")
		if _, _, err := q.Move(t.Context(), "old", "new", t0.Add(2*time.Second)); err != nil {
			t.Fatalf("Move: %v", err)
		}
		for _, want := range []*sender.Envelope{done, dead, waiting} {
			got, _, err := q.Get(t.Context(), "new", want.ID)
			if err != nil {
				t.Fatalf("Get(new, %s): %v", want.ID, err)
			}
			same(t, "Get(new, "+want.ID+") after the move", got, want)
		}
	})
}

// settleLeased settles each of l with kind, its log grown by one attempt.
func settleLeased(t *testing.T, q sender.Queue, dest string, l []sender.Leased, kind sender.OutcomeKind, now time.Time) {
	t.Helper()
	var os []sender.Outcome
	for _, x := range l {
		e := *x.Envelope
		e.Attempts++
		e.Log = append(slices.Clone(e.Log), sender.Attempt{At: now, Status: 200, RedriveID: e.RedriveID})
		os = append(os, sender.Outcome{Kind: kind, ID: e.ID, LeaseUntil: x.LeaseUntil, Envelope: &e})
	}
	mustSettle(t, q, dest, os, now, 0)
}
