package dedupe_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"

	"github.com/hookgate/hookgate/dedupe"
)

// TestBeginBodyComparesCachedBodies: a copy replayed from the replay cache
// is told a duplicate by its body, compared with the one kept there,
// without computing its fingerprint; a copy of another body is a mismatch,
// as its fingerprint would say. A record cached without its body (one
// over 4 KiB) is compared by fingerprint.
func TestBeginBodyComparesCachedBodies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &countingStore{Store: newStore(t)}
		d := newDeduper(t, store, dedupe.Config{})
		const orig = `{"id":"evt_1"}`
		body := []byte(orig)
		sums := 0
		sum := func() dedupe.Fingerprint { sums++; return dedupe.FingerprintOf([]byte(orig)) }
		dec, err := d.BeginBody(t.Context(), "k", body, sum)
		if err != nil || dec.Action != dedupe.Forward || dec.Fingerprint != dedupe.FingerprintOf(body) {
			t.Fatalf("first copy: %+v, %v; want a forward with the body's fingerprint", dec, err)
		}
		mustFinish(t, d, "k", dec, dedupe.Response{Status: 200, Body: []byte("ok")})
		copy(body, `{"id":"evt_X"}`) // the request's buffer is the caller's: the cache keeps a copy
		body = []byte(orig)
		claims, sums := store.claims, 0
		for range 3 {
			rep, _ := d.BeginBody(t.Context(), "k", []byte(`{"id":"evt_1"}`), sum)
			if rep.Action != dedupe.Replay || rep.Record.Status != 200 {
				t.Fatalf("duplicate: %+v, want a replay", rep)
			}
		}
		if sums != 0 || store.claims != claims {
			t.Errorf("cached replays computed %d fingerprints and made %d claims, want none", sums, store.claims-claims)
		}
		if rep, _ := d.BeginBody(t.Context(), "k", []byte(`{"id":"evt_2"}`), nil); rep.Result != "mismatch" {
			t.Errorf("another body: %+v, want mismatch", rep)
		}

		// A body larger than the cache keeps is cached without it:
		// compared by fingerprint.
		large := bytes.Repeat([]byte("x"), 4<<10+1)
		dec, _ = d.BeginBody(t.Context(), "j", large, nil)
		mustFinish(t, d, "j", dec, dedupe.Response{Status: 200})
		sumLarge := func() dedupe.Fingerprint { sums++; return dedupe.FingerprintOf(large) }
		if rep, _ := d.BeginBody(t.Context(), "j", large, sumLarge); rep.Action != dedupe.Replay || sums != 1 {
			t.Errorf("record cached without its body: %+v after %d sums, want a replay after 1", rep, sums)
		}
		if rep, _ := d.BeginBody(t.Context(), "j", []byte("other"), nil); rep.Result != "mismatch" {
			t.Errorf("record cached without its body, another body: %+v, want mismatch", rep)
		}

		// Another instance caches the record, with this copy's body, when
		// it first replays it from the store.
		other := newDeduper(t, store, dedupe.Config{})
		claims = store.claims
		for range 2 {
			if rep, _ := other.BeginBody(t.Context(), "k", body, nil); rep.Action != dedupe.Replay {
				t.Fatalf("second instance: %+v, want a replay", rep)
			}
		}
		if rep, _ := other.BeginBody(t.Context(), "k", []byte("other"), nil); rep.Result != "mismatch" || store.claims != claims+1 {
			t.Errorf("second instance: %+v after %d claims, want mismatch after 1", rep, store.claims-claims)
		}
	})
}

// TestCachedReplayWritesTheRecord: a replay from the cache (its header
// laid out once) answers exactly what Record.Replay answers, marks
// included, and a handler that changes the answer's header values in
// place (Caddy's header directive does) leaves the next replay as it was.
func TestCachedReplayWritesTheRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, resp := range []dedupe.Response{
			{Status: 201, Header: http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"a", "b"}, "Idempotent-Replayed": {"false"}}, Body: []byte(`{"ok":true}`)},
			{Status: 200, Header: http.Header{"Link": {"<a>", "<b>"}}, Body: []byte("streamed"), Streamed: true},
			{Status: 204},
		} {
			d := newDeduper(t, newStore(t), dedupe.Config{})
			body := []byte("request")
			dec, _ := d.BeginBody(t.Context(), "k", body, nil)
			mustFinish(t, d, "k", dec, resp)
			rep, _ := d.BeginBody(t.Context(), "k", body, nil)
			if rep.Action != dedupe.Replay {
				t.Fatalf("%+v, want a replay", rep)
			}
			want := httptest.NewRecorder()
			rep.Record.Replay(want)
			if want.Header().Get("Idempotent-Replayed") != "true" || want.Header().Get("Content-Length") == "" {
				t.Fatalf("Record.Replay's header %v lacks the marks", want.Header())
			}
			for range 2 {
				got := httptest.NewRecorder()
				rep.Replay(got)
				if got.Code != want.Code || got.Body.String() != want.Body.String() {
					t.Errorf("cached replay %d %q, want %d %q", got.Code, got.Body, want.Code, want.Body)
				}
				if diff := cmp.Diff(want.Header(), got.Header()); diff != "" {
					t.Errorf("cached replay's header (-want +got):\n%s", diff)
				}
				for _, vs := range got.Header() {
					for i := range vs {
						vs[i] = "changed"
					}
					_ = append(vs, "appended")
				}
			}
		}
	})
}

// TestFinishLeavesOutTheGatewaysHeaders: with Response.Before, a field
// that holds the same values as before the forward (the gateway's own) is
// not recorded, one the upstream changed is, and hop-by-hop fields are
// left out as ever; the values recorded are copies.
func TestFinishLeavesOutTheGatewaysHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDeduper(t, newStore(t), dedupe.Config{ReplayCache: -1})
		after := http.Header{
			"Server": {"Caddy"}, "Vary": {"Origin"}, "X-Upstream": {"a", "b"}, "Connection": {"close"},
			"Content-Type": {"application/json"},
		}
		before := http.Header{"Server": {"Caddy"}, "Vary": {"Accept"}, "Content-Type": {"text/plain"}}
		dec, _ := d.BeginBody(t.Context(), "k", payload, nil)
		mustFinish(t, d, "k", dec, dedupe.Response{Status: 200, Header: after, Before: before})
		after["X-Upstream"][0] = "changed after the record"
		rep, _ := d.BeginBody(t.Context(), "k", payload, nil)
		want := http.Header{"Vary": {"Origin"}, "X-Upstream": {"a", "b"}, "Content-Type": {"application/json"}}
		if diff := cmp.Diff(want, rep.Record.Header); diff != "" {
			t.Errorf("recorded header (-want +got):\n%s", diff)
		}
	})
}
