package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/sender"
)

func testEvent(t *testing.T) Event {
	t.Helper()
	e, err := NewEvent("reservation.{state}", &Row{Key: "r-1", State: "confirmed", Version: 3, UpdatedAt: old})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestAdminEnqueuer: the command's door posts the event to the admin
// API's enqueue endpoint of the destination and reads its answers.
func TestAdminEnqueuer(t *testing.T) {
	for name, c := range map[string]struct {
		answer  func(w http.ResponseWriter)
		want    Outcome
		wantErr string
		badID   bool
	}{
		"new": {answer: func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusAccepted)
			_, _ = fmt.Fprint(w, `{"state":"queued"}`)
		}, want: Enqueued},
		"duplicate": {answer: func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusAccepted)
			_, _ = fmt.Fprint(w, `{"state":"queued","duplicate":true}`)
		}, want: AlreadyEnqueued},
		"another payload": {answer: func(w http.ResponseWriter) {
			problem.Write(w, problem.KeyReusedWithDifferentPayload, "", 0)
		}, want: AlreadyEnqueued},
		"bad id": {answer: func(w http.ResponseWriter) {
			problem.Write(w, problem.BadID, "too long", 0)
		}, wantErr: "the admin API answered 400 bad_id: too long", badID: true},
		"another problem": {answer: func(w http.ResponseWriter) {
			problem.Write(w, problem.UnknownDestination, "no such destination", 0)
		}, wantErr: "the admin API answered 404 unknown_destination: no such destination"},
		"no problem": {answer: func(w http.ResponseWriter) { w.WriteHeader(http.StatusBadGateway) },
			wantErr: "the admin API answered 502 Bad Gateway"},
		"not JSON": {answer: func(w http.ResponseWriter) { _, _ = fmt.Fprint(w, "ok") },
			wantErr: "the admin API's answer: "},
	} {
		t.Run(name, func(t *testing.T) {
			var got struct {
				method, path, contentType string
				body                      map[string]any
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				got.method, got.path, got.contentType = r.Method, r.URL.EscapedPath(), r.Header.Get("Content-Type")
				if err := json.Unmarshal(b, &got.body); err != nil {
					t.Errorf("the enqueuer sent %q: %v", b, err)
				}
				c.answer(w)
			}))
			defer srv.Close()
			a, err := NewAdminEnqueuer(strings.TrimPrefix(srv.URL, "http://"), "enroll ment")
			if err != nil {
				t.Fatal(err)
			}
			out, err := a.Enqueue(t.Context(), testEvent(t))
			switch {
			case c.wantErr == "" && (err != nil || out != c.want):
				t.Errorf("Enqueue = %v, %v; want %v", out, err, c.want)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Errorf("err = %v, want %q", err, c.wantErr)
			case errors.Is(err, sender.ErrBadID) != c.badID:
				t.Errorf("err = %v: wraps sender.ErrBadID %v, want %v", err, !c.badID, c.badID)
			}
			if got.method != http.MethodPost || got.path != "/hookgate/destinations/enroll%20ment/enqueue" || got.contentType != "application/json" {
				t.Errorf("request %s %s (%s)", got.method, got.path, got.contentType)
			}
			want := map[string]any{
				"id": "reconcile:r-1:confirmed:3", "event_type": "reservation.confirmed", "entity": "r-1",
				"event_time": old.Format(time.RFC3339Nano),
				"payload": map[string]any{"id": "reconcile:r-1:confirmed:3", "type": "reservation.confirmed", "key": "r-1",
					"state": "confirmed", "version": 3.0, "occurred_at": old.Format(time.RFC3339Nano)},
			}
			if diff := cmp.Diff(want, got.body); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAdminEnqueuerAddress: --address is a host:port or a URL; an
// unreachable gateway is an error naming its origin only.
func TestAdminEnqueuerAddress(t *testing.T) {
	if _, err := NewAdminEnqueuer("http://", "d"); err == nil || err.Error() != "--address: want host:port, an http:// URL, or unix//path/to/admin.sock" {
		t.Errorf("err = %v", err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	addr := srv.URL
	srv.Close()
	a, err := NewAdminEnqueuer(addr+"/", "d")
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Enqueue(t.Context(), testEvent(t))
	if err == nil || !strings.HasPrefix(err.Error(), "is the gateway running with its admin API on "+addr+"? ") || strings.Contains(err.Error(), "/enqueue") {
		t.Errorf("err = %v", err)
	}
}

// envelopeFake is an EnvelopeEnqueuer answering res, err.
type envelopeFake struct {
	got *sender.Envelope
	res sender.EnqueueResult
	err error
}

func (f *envelopeFake) Enqueue(_ context.Context, e *sender.Envelope) (sender.EnqueueResult, error) {
	f.got = e
	return f.res, f.err
}

// TestSenderEnqueuer: the scheduled run's door enqueues the event as an
// envelope of its destination; a duplicate, of this payload or another,
// is already enqueued.
func TestSenderEnqueuer(t *testing.T) {
	e := testEvent(t)
	for name, c := range map[string]struct {
		res  sender.EnqueueResult
		want Outcome
	}{
		"new":             {sender.EnqueueResult{}, Enqueued},
		"duplicate":       {sender.EnqueueResult{Duplicate: true}, AlreadyEnqueued},
		"another payload": {sender.EnqueueResult{Duplicate: true, Mismatch: true}, AlreadyEnqueued},
		"mismatch only":   {sender.EnqueueResult{Mismatch: true}, AlreadyEnqueued},
	} {
		f := &envelopeFake{res: c.res}
		out, err := SenderEnqueuer{Sender: f, Destination: "enrollment"}.Enqueue(t.Context(), e)
		if err != nil || out != c.want {
			t.Errorf("%s: Enqueue = %v, %v; want %v", name, out, err, c.want)
		}
		want := &sender.Envelope{ID: e.ID, Destination: "enrollment", EventType: e.Type, Entity: e.Entity, EventTime: e.EventTime, Payload: e.Payload}
		if diff := cmp.Diff(want, f.got); diff != "" {
			t.Errorf("%s: envelope (-want +got):\n%s", name, diff)
		}
	}
	want := errors.New("the sender is not running")
	if _, err := (SenderEnqueuer{Sender: &envelopeFake{err: want}}).Enqueue(t.Context(), e); err != want {
		t.Errorf("err = %v, want the sender's", err)
	}
}
