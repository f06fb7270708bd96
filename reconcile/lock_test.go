package reconcile

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/dedupe/boltstore"
	"github.com/hookgate/hookgate/internal/boltfile"
	"github.com/hookgate/hookgate/internal/bolttest"
)

// claimerFake records the claims made and answers with status or err.
type claimerFake struct {
	keys   []string
	claims []dedupe.Claim
	status dedupe.ClaimStatus
	err    error
}

func (c *claimerFake) Claim(_ context.Context, key string, cl dedupe.Claim) (dedupe.ClaimResult, error) {
	c.keys, c.claims = append(c.keys, key), append(c.claims, cl)
	return dedupe.ClaimResult{Status: c.status}, c.err
}

// TestStoreLockerClaim: a slot is a claim under the job's and the slot's
// key (the store's "reconcile" namespace prefixes it, as "\x00reconcile/"
// before namespaces); instances of every version must agree on it.
// The claim is leased for the lease, kept for twice that, under a token of
// its own; only a fresh claim holds the slot.
func TestStoreLockerClaim(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 3, 0, 0, time.UTC)
	slot := time.Date(2026, 11, 30, 12, 15, 0, 0, time.UTC)
	for status, want := range map[dedupe.ClaimStatus]bool{
		dedupe.Claimed: true, dedupe.TookOver: false, dedupe.InFlight: false, dedupe.Recorded: false, dedupe.Mismatch: false,
	} {
		c := &claimerFake{status: status}
		l := StoreLocker{Store: c, Now: func() time.Time { return at }}
		for range 2 {
			got, err := l.Lock(t.Context(), "enrollments", slot, 15*time.Minute)
			if err != nil || got != want {
				t.Errorf("status %d: Lock = %v, %v; want %v", status, got, err, want)
			}
		}
		if diff := cmp.Diff([]string{"enrollments/1796040900", "enrollments/1796040900"}, c.keys); diff != "" {
			t.Errorf("keys (-want +got):\n%s", diff)
		}
		cl := c.claims[0]
		if cl.Lease != 15*time.Minute || cl.Retention != 30*time.Minute || !cl.Now.Equal(at) || cl.Fingerprint != dedupe.FingerprintOf([]byte("enrollments")) {
			t.Errorf("claim %+v", cl)
		}
		if cl.Token == "" || cl.Token == c.claims[1].Token {
			t.Errorf("tokens %q and %q: want each claim its own", cl.Token, c.claims[1].Token)
		}
	}
	want := errors.New("store down")
	if _, err := (StoreLocker{Store: &claimerFake{err: want}}).Lock(t.Context(), "j", slot, time.Minute); err != want {
		t.Errorf("err = %v, want the store's", err)
	}
}

// TestStoreLockerOneInstance: over one embedded store, the first instance
// to claim a slot holds it and another does not; the next slot is free.
func TestStoreLockerOneInstance(t *testing.T) {
	db := bolttest.Open(t, boltfile.Options(time.Second, false))
	store, err := boltstore.New(db, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	a, b := StoreLocker{Store: store}, StoreLocker{Store: store}
	slot := time.Now().Truncate(time.Minute).Add(time.Minute)
	for _, c := range []struct {
		who  string
		l    StoreLocker
		slot time.Time
		want bool
	}{
		{"a", a, slot, true},
		{"b", b, slot, false},
		{"a again", a, slot, false},
		{"b, the next slot", b, slot.Add(time.Minute), true},
	} {
		got, err := c.l.Lock(t.Context(), "enrollments", c.slot, time.Minute)
		if err != nil || got != c.want {
			t.Errorf("%s: Lock = %v, %v; want %v", c.who, got, err, c.want)
		}
	}
}
