package redisstore

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/redistest"
)

// TestReadsTheHashLayout: during a rolling upgrade, instances of the
// earlier version (hashStore, writing the HASH layout) and of this one
// share Redis. Whatever the earlier one wrote, this one answers as the
// earlier one would have: its records replay, its claims are in flight
// or taken over once their lease ends, its keys mismatch another body.
func TestReadsTheHashLayout(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	var (
		ctx       = t.Context()
		oldS      = hashStore{New(rdb, "up")}
		newS      = New(rdb, "up")
		t0        = time.Unix(1_800_000_000, 0)
		lease     = 30 * time.Second
		retention = time.Hour
		fpA       = dedupe.FingerprintOf([]byte("a"))
		fpB       = dedupe.FingerprintOf([]byte("b"))
		rec       = dedupe.Record{Status: 201, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"ok":true}`)}
	)
	claim := func(s claimRecorder, key string, fp dedupe.Fingerprint, token string, now time.Time, want dedupe.ClaimStatus) dedupe.ClaimResult {
		t.Helper()
		res, err := s.Claim(ctx, key, dedupe.Claim{Fingerprint: fp, Token: token, Lease: lease, Retention: retention, Now: now})
		if err != nil || res.Status != want {
			t.Fatalf("Claim(%s, %s) = %v, %v; want %v", key, token, res.Status, err, want)
		}
		return res
	}

	t.Run("RecordReplays", func(t *testing.T) {
		claim(oldS, "rec", fpA, "old", t0, dedupe.Claimed)
		if err := oldS.Record(ctx, "rec", "old", rec, retention, t0.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		res := claim(newS, "rec", fpA, "new", t0.Add(2*time.Second), dedupe.Recorded)
		if diff := cmp.Diff(&rec, res.Record); diff != "" {
			t.Errorf("replayed record (-want +got):\n%s", diff)
		}
		if want := t0.Add(time.Second + retention); !res.Expires.Equal(want) {
			t.Errorf("Expires = %v, want %v", res.Expires, want)
		}
		claim(newS, "rec", fpB, "new", t0.Add(2*time.Second), dedupe.Mismatch)
		e, err := newS.Get(ctx, "rec", t0.Add(2*time.Second))
		if err != nil || e.State != dedupe.StateRecorded || e.Fingerprint != fpA || !cmp.Equal(&rec, e.Record) {
			t.Errorf("Get = %+v, %v; want the record", e, err)
		}
		// The record of the earlier version is never released.
		if err := newS.Release(ctx, "rec", "old"); err != nil {
			t.Fatal(err)
		}
		claim(newS, "rec", fpA, "new", t0.Add(3*time.Second), dedupe.Recorded)
		// Past its expiry it is gone: any body is claimed afresh.
		claim(newS, "rec", fpB, "new", t0.Add(time.Second+retention), dedupe.Claimed)
	})

	t.Run("ClaimInFlightThenTakenOver", func(t *testing.T) {
		claim(oldS, "cl", fpA, "old", t0, dedupe.Claimed)
		res := claim(newS, "cl", fpA, "new", t0.Add(time.Second), dedupe.InFlight)
		if !res.LeaseUntil.Equal(t0.Add(lease)) {
			t.Errorf("LeaseUntil = %v, want %v", res.LeaseUntil, t0.Add(lease))
		}
		claim(newS, "cl", fpB, "new", t0.Add(time.Second), dedupe.Mismatch)
		e, err := newS.Get(ctx, "cl", t0.Add(time.Second))
		if err != nil || e.State != dedupe.StateClaimed || !e.LeaseUntil.Equal(t0.Add(lease)) {
			t.Errorf("Get = %+v, %v; want claimed until %v", e, err, t0.Add(lease))
		}
		// Neither a record nor a release under a token the key does not
		// hold changes it.
		if err := newS.Record(ctx, "cl", "new", rec, retention, t0); !errors.Is(err, dedupe.ErrClaimLost) {
			t.Errorf("Record by a token that never held it: %v, want ErrClaimLost", err)
		}
		if err := newS.Release(ctx, "cl", "new"); err != nil {
			t.Fatal(err)
		}
		later := t0.Add(lease + time.Second)
		claim(newS, "cl", fpA, "new", later, dedupe.TookOver)
		claim(newS, "cl", fpA, "new", later, dedupe.TookOver) // a retry
		// The earlier holder is fenced off: its record fails.
		if err := oldS.Record(ctx, "cl", "old", rec, retention, later); err == nil {
			t.Error("the expired holder of the earlier version recorded over the take-over")
		}
		if err := newS.Record(ctx, "cl", "new", rec, retention, later); err != nil {
			t.Fatal(err)
		}
		claim(newS, "cl", fpA, "again", later, dedupe.Recorded)
	})

	t.Run("ExpiredEntryIsReplaced", func(t *testing.T) {
		claim(oldS, "gone", fpA, "old", t0, dedupe.Claimed)
		claim(newS, "gone", fpB, "new", t0.Add(retention), dedupe.Claimed)
		claim(newS, "gone", fpB, "new", t0.Add(retention), dedupe.Claimed) // a retry
		if err := newS.Record(ctx, "gone", "new", rec, retention, t0.Add(retention)); err != nil {
			t.Fatal(err)
		}
	})
}

// TestMalformedEntry: an entry this code cannot read is an error, never a
// claim granted over it.
func TestMalformedEntry(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	s := New(rdb, "bad")
	if err := rdb.Set(t.Context(), entryKey("bad", "k"), "not an entry", 0).Err(); err != nil {
		t.Fatal(err)
	}
	c := dedupe.Claim{Fingerprint: dedupe.FingerprintOf(nil), Token: "t", Lease: time.Second, Retention: time.Hour, Now: time.Unix(1_800_000_000, 0)}
	if res, err := s.Claim(t.Context(), "k", c); err == nil {
		t.Errorf("Claim over a malformed entry = %v, want an error", res.Status)
	}
	if e, err := s.Get(t.Context(), "k", c.Now); err == nil {
		t.Errorf("Get of a malformed entry = %+v, want an error", e)
	}
	c.Token = strings.Repeat("t", maxToken+1)
	if _, err := s.Claim(t.Context(), "other", c); err == nil {
		t.Error("Claim with a token over 255 bytes succeeded")
	}
}
