// Package storetest is the conformance suite every dedupe.Store backend
// passes: the claim, record, release and get contract, leases, fencing,
// retention by the caller's clock, and atomicity under concurrent claims.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/dedupe/freshness"
)

// Backend is what a backend provides: the dedupe and freshness stores,
// and the values kept once and for good.
type Backend interface {
	dedupe.Store
	freshness.EntityStore
	// Keep stores value under key unless one is kept there, and returns
	// the one kept; Kept reads it, nil when there is none.
	Keep(ctx context.Context, key string, value []byte) ([]byte, error)
	Kept(ctx context.Context, key string) ([]byte, error)
}

// NewStore returns a store for one test, isolated from every other test's
// (its own key prefix or file), and cleans it up with t.Cleanup.
type NewStore func(t *testing.T) Backend

var (
	t0        = time.Unix(1_800_000_000, 0)
	lease     = 30 * time.Second
	retention = time.Hour
	fpA       = dedupe.FingerprintOf([]byte(`{"a":1}`))
	fpB       = dedupe.FingerprintOf([]byte(`{"b":2}`))
)

func claim(fp dedupe.Fingerprint, token string, now time.Time) dedupe.Claim {
	return dedupe.Claim{Fingerprint: fp, Token: token, Lease: lease, Retention: retention, Now: now}
}

func record() dedupe.Record {
	return dedupe.Record{
		Status: 201,
		Header: http.Header{"Content-Type": {"application/json"}, "X-Multi": {"1", "2"}},
		Body:   []byte("{\"enrolled\":true}\x00\xff binary-safe"),
	}
}

// Run runs the suite.
func Run(t *testing.T, newStore NewStore) {
	runEntities(t, newStore)
	runKept(t, newStore)

	t.Run("ClaimThenInFlightThenMismatch", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStore(t), t.Context()
		mustClaim(t, s, "k", claim(fpA, "tok1", t0), dedupe.Claimed)
		res := mustClaim(t, s, "k", claim(fpA, "tok2", t0.Add(time.Second)), dedupe.InFlight)
		if !res.LeaseUntil.Equal(t0.Add(lease)) {
			t.Errorf("LeaseUntil = %v, want %v", res.LeaseUntil, t0.Add(lease))
		}
		mustClaim(t, s, "k", claim(fpB, "tok3", t0.Add(time.Second)), dedupe.Mismatch)
		e, err := s.Get(ctx, "k", t0.Add(time.Second))
		if err != nil || e.State != dedupe.StateClaimed || e.Fingerprint != fpA || !e.LeaseUntil.Equal(t0.Add(lease)) {
			t.Errorf("Get = %+v, %v; want claimed by fpA until %v", e, err, t0.Add(lease))
		}
	})

	t.Run("RecordThenReplay", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStore(t), t.Context()
		mustClaim(t, s, "k", claim(fpA, "tok1", t0), dedupe.Claimed)
		want := record()
		if err := s.Record(ctx, "k", "tok1", want, retention, t0.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		res := mustClaim(t, s, "k", claim(fpA, "tok2", t0.Add(2*time.Second)), dedupe.Recorded)
		if diff := cmp.Diff(&want, res.Record); diff != "" {
			t.Errorf("replayed record (-want +got):\n%s", diff)
		}
		if wantExp := t0.Add(time.Second + retention); !res.Expires.Equal(wantExp) {
			t.Errorf("Expires = %v, want %v (retention from the record)", res.Expires, wantExp)
		}
		mustClaim(t, s, "k", claim(fpB, "tok3", t0.Add(2*time.Second)), dedupe.Mismatch)
		e, err := s.Get(ctx, "k", t0.Add(2*time.Second))
		if err != nil || e.State != dedupe.StateRecorded || e.Fingerprint != fpA {
			t.Fatalf("Get = %+v, %v; want recorded", e, err)
		}
		if diff := cmp.Diff(&want, e.Record); diff != "" {
			t.Errorf("Get record (-want +got):\n%s", diff)
		}
	})

	t.Run("BodyOmittedRecord", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStore(t), t.Context()
		mustClaim(t, s, "k", claim(fpA, "tok1", t0), dedupe.Claimed)
		want := dedupe.Record{Status: 200, Header: http.Header{}, BodyOmitted: true}
		if err := s.Record(ctx, "k", "tok1", want, retention, t0); err != nil {
			t.Fatal(err)
		}
		res := mustClaim(t, s, "k", claim(fpA, "tok2", t0), dedupe.Recorded)
		if !res.Record.BodyOmitted || res.Record.Status != 200 {
			t.Errorf("record = %+v, want status 200 with body omitted", res.Record)
		}
	})

	t.Run("FencingToken", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStore(t), t.Context()
		mustClaim(t, s, "k", claim(fpA, "tok1", t0), dedupe.Claimed)
		if err := s.Record(ctx, "k", "not-the-token", record(), retention, t0); !errors.Is(err, dedupe.ErrClaimLost) {
			t.Errorf("Record with a wrong token: err = %v, want ErrClaimLost", err)
		}
		if err := s.Release(ctx, "k", "not-the-token"); err != nil {
			t.Errorf("Release with a wrong token: %v", err)
		}
		mustClaim(t, s, "k", claim(fpA, "tok2", t0.Add(time.Second)), dedupe.InFlight)
		if err := s.Record(ctx, "absent", "tok1", record(), retention, t0); !errors.Is(err, dedupe.ErrClaimLost) {
			t.Errorf("Record on an absent key: err = %v, want ErrClaimLost", err)
		}
	})

	t.Run("ReleaseFreesTheKey", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStore(t), t.Context()
		mustClaim(t, s, "k", claim(fpA, "tok1", t0), dedupe.Claimed)
		if err := s.Release(ctx, "k", "tok1"); err != nil {
			t.Fatal(err)
		}
		e, err := s.Get(ctx, "k", t0)
		if err != nil || e.State != dedupe.Absent {
			t.Fatalf("Get after Release = %+v, %v; want absent", e, err)
		}
		// A released key may be claimed by any body: nothing was applied.
		mustClaim(t, s, "k", claim(fpB, "tok2", t0), dedupe.Claimed)
		if err := s.Record(ctx, "k", "tok1", record(), retention, t0); !errors.Is(err, dedupe.ErrClaimLost) {
			t.Errorf("Record by the released token: err = %v, want ErrClaimLost", err)
		}
	})

	t.Run("ForgetAndExpiresAt", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStore(t), t.Context()
		mustClaim(t, s, "k", claim(fpA, "tok1", t0), dedupe.Claimed)
		if err := s.Record(ctx, "k", "tok1", record(), retention, t0.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		e, err := s.Get(ctx, "k", t0.Add(time.Second))
		if err != nil || !e.Expires.Equal(t0.Add(time.Second+retention)) {
			t.Errorf("Get = %+v, %v; want it expiring at %v", e, err, t0.Add(time.Second+retention))
		}
		if found, err := s.Forget(ctx, "k"); !found || err != nil {
			t.Fatalf("Forget = %v, %v; want found", found, err)
		}
		if found, err := s.Forget(ctx, "k"); found || err != nil {
			t.Fatalf("Forget again = %v, %v; want not found", found, err)
		}
		// Forgotten: the next copy is a new forward, of any body.
		mustClaim(t, s, "k", claim(fpB, "tok2", t0.Add(2*time.Second)), dedupe.Claimed)
	})

	t.Run("ExpiredLeaseIsTakenOver", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStore(t), t.Context()
		mustClaim(t, s, "k", claim(fpA, "tok1", t0), dedupe.Claimed)
		later := t0.Add(lease + time.Second)
		mustClaim(t, s, "k", claim(fpB, "tok2", later), dedupe.Mismatch)
		mustClaim(t, s, "k", claim(fpA, "tok2", later), dedupe.TookOver)
		// A retry of the take-over (its reply lost) is still a take-over.
		mustClaim(t, s, "k", claim(fpA, "tok2", later), dedupe.TookOver)
		if err := s.Record(ctx, "k", "tok1", record(), retention, later); !errors.Is(err, dedupe.ErrClaimLost) {
			t.Errorf("Record by the expired holder: err = %v, want ErrClaimLost", err)
		}
		if err := s.Record(ctx, "k", "tok2", record(), retention, later); err != nil {
			t.Errorf("Record by the new holder: %v", err)
		}
		mustClaim(t, s, "k", claim(fpA, "tok3", later), dedupe.Recorded)
	})

	t.Run("RetentionRunsFromTheRecord", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStore(t), t.Context()
		mustClaim(t, s, "k", claim(fpA, "tok1", t0), dedupe.Claimed)
		recordedAt := t0.Add(10 * time.Second)
		if err := s.Record(ctx, "k", "tok1", record(), retention, recordedAt); err != nil {
			t.Fatal(err)
		}
		// A replay does not extend retention.
		mustClaim(t, s, "k", claim(fpA, "tok2", recordedAt.Add(retention/2)), dedupe.Recorded)
		mustClaim(t, s, "k", claim(fpA, "tok2", recordedAt.Add(retention-time.Second)), dedupe.Recorded)
		gone := recordedAt.Add(retention)
		e, err := s.Get(ctx, "k", gone)
		if err != nil || e.State != dedupe.Absent {
			t.Fatalf("Get at the end of retention = %+v, %v; want absent", e, err)
		}
		mustClaim(t, s, "k", claim(fpB, "tok3", gone), dedupe.Claimed)
	})

	t.Run("RetriesUnderOneTokenAreIdempotent", func(t *testing.T) {
		// go-redis resends a script whose reply was lost: the retry must
		// find its own claim, not a rival's.
		t.Parallel()
		s, ctx := newStore(t), t.Context()
		mustClaim(t, s, "k", claim(fpA, "tok1", t0), dedupe.Claimed)
		mustClaim(t, s, "k", claim(fpA, "tok1", t0), dedupe.Claimed)
		for range 2 {
			if err := s.Record(ctx, "k", "tok1", record(), retention, t0); err != nil {
				t.Fatalf("Record (retried): %v", err)
			}
		}
		mustClaim(t, s, "k", claim(fpA, "tok2", t0), dedupe.Recorded)
		if err := s.Release(ctx, "k", "tok1"); err != nil {
			t.Fatal(err)
		}
		mustClaim(t, s, "k", claim(fpA, "tok2", t0), dedupe.Recorded) // a record is never released

		mustAcquire(t, s, "e", acquire(10, "a", t0), freshness.Acquired)
		mustAcquire(t, s, "e", acquire(10, "a", t0), freshness.Acquired)
		mustFinish(t, s, "e", "a", advance(10, t0))
		mustFinish(t, s, "e", "a", advance(10, t0))
		mustAcquire(t, s, "e", acquire(11, "b", t0), freshness.Acquired)
	})

	t.Run("ConcurrentClaimsHaveOneWinner", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		const n = 50
		var wg sync.WaitGroup
		results := make([]dedupe.ClaimStatus, n)
		for i := range n {
			wg.Go(func() {
				res, err := s.Claim(t.Context(), "hot", claim(fpA, fmt.Sprint("tok", i), t0))
				if err != nil {
					t.Error(err)
				}
				results[i] = res.Status
			})
		}
		wg.Wait()
		counts := map[dedupe.ClaimStatus]int{}
		for _, r := range results {
			counts[r]++
		}
		if counts[dedupe.Claimed] != 1 || counts[dedupe.InFlight] != n-1 {
			t.Errorf("claims = %v, want 1 claimed and %d in flight", counts, n-1)
		}
	})

	t.Run("KeysAreIsolatedWhateverTheirBytes", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStore(t), t.Context()
		keys := []string{"a", "a}", "{a}", "a:b", "ключ", "sp ace", "x{y}z", string(bytes.Repeat([]byte("k"), 300))}
		for i, k := range keys {
			mustClaim(t, s, k, claim(fpA, fmt.Sprint("tok", i), t0), dedupe.Claimed)
		}
		for i, k := range keys {
			if err := s.Record(ctx, k, fmt.Sprint("tok", i), dedupe.Record{Status: 200 + i}, retention, t0); err != nil {
				t.Fatalf("Record(%q): %v", k, err)
			}
		}
		for i, k := range keys {
			res := mustClaim(t, s, k, claim(fpA, "again", t0), dedupe.Recorded)
			if res.Record.Status != 200+i {
				t.Errorf("key %q replays status %d, want %d", k, res.Record.Status, 200+i)
			}
		}
	})
}

func mustClaim(t *testing.T, s dedupe.Store, key string, c dedupe.Claim, want dedupe.ClaimStatus) dedupe.ClaimResult {
	t.Helper()
	res, err := s.Claim(t.Context(), key, c)
	if err != nil {
		t.Fatalf("Claim(%q): %v", key, err)
	}
	if res.Status != want {
		t.Fatalf("Claim(%q) = %v, want %v", key, res.Status, want)
	}
	return res
}
