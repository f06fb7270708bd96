package sender

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"
)

// sameAsJSON fails unless decode reads data as encoding/json does, where
// encoding/json decodes it: the fields the store compares and reads.
func sameAsJSON(t *testing.T, data []byte) {
	t.Helper()
	var want gobreaker.SharedState
	if json.Unmarshal(data, &want) != nil {
		return // a state that does not decode: decode may read it or not
	}
	got := decode(data)
	if !got.ok || got.st.State != want.State || got.st.Generation != want.Generation || got.st.Counts != want.Counts || !got.st.Expiry.Equal(want.Expiry) {
		t.Fatalf("decode(%s) = %+v (ok %v); encoding/json reads %+v", data, got.st, got.ok, want)
	}
}

// TestDecodeReadsWhatGobreakerWrites: decode reads each state gobreaker
// writes as encoding/json reads it, and refuses what is not JSON.
func TestDecodeReadsWhatGobreakerWrites(t *testing.T) {
	expiry := time.Date(2026, 12, 1, 18, 23, 50, 485510646, time.FixedZone("", 3600))
	for _, st := range []gobreaker.SharedState{
		{},
		{State: gobreaker.StateClosed, Generation: 1, Counts: gobreaker.Counts{Requests: 12, TotalSuccesses: 11, ConsecutiveFailures: 1, TotalFailures: 1}},
		{State: gobreaker.StateOpen, Generation: 7, Age: 3, Expiry: expiry, Start: expiry.Add(-time.Hour)},
		{State: gobreaker.StateHalfOpen, Generation: 1<<64 - 1, Counts: gobreaker.Counts{Requests: 1<<32 - 1, ConsecutiveSuccesses: 4}, Buckets: []gobreaker.Counts{{Requests: 2}}},
	} {
		data, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		sameAsJSON(t, data)
	}
	for _, bad := range []string{"", "{", "[]", `{"state":"x"}`} {
		if d := decode([]byte(bad)); d.ok {
			t.Errorf("decode(%q) ok; want not", bad)
		}
	}
}

// FuzzDecodeBreakerState holds decode to encoding/json on any input.
func FuzzDecodeBreakerState(f *testing.F) {
	f.Add([]byte(`{"state":2,"generation":3,"age":0,"counts":{"Requests":5,"TotalSuccesses":0,"TotalFailures":0,"TotalExclusions":0,"ConsecutiveSuccesses":0,"ConsecutiveFailures":0},"buckets":null,"start":"0001-01-01T00:00:00Z","expiry":"2026-12-01T18:23:50.485510646Z"}`))
	f.Add([]byte(`{"State":1,"state":2,"generation":1,"counts":{"requests":1,"Requests":2,"TotalSuccesses":0,"TotalFailures":0,"TotalExclusions":0,"ConsecutiveSuccesses":0,"ConsecutiveFailures":0},"expiry":"0001-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"state":1e0,"generation":-1,"counts":{},"expiry":"x"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		sameAsJSON(t, data)
	})
}
