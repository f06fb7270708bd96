package reconcile

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// Locker lets one instance at a time run a slot of a scheduled job.
type Locker interface {
	// Lock claims job's slot for lease and reports whether this instance
	// holds it: false when another instance claimed it first.
	Lock(ctx context.Context, job string, slot time.Time, lease time.Duration) (bool, error)
}

// Claimer is the part of a dedupe store a StoreLocker needs: the hookgate
// app hands over its store's "reconcile" namespace (store.Lazy.Claims),
// whose keys no webhook's key meets and whose calls are not counted as
// webhook claims.
type Claimer interface {
	Claim(ctx context.Context, key string, c dedupe.Claim) (dedupe.ClaimResult, error)
}

// StoreLocker is a Locker over the state store the instances share. A
// slot is a dedupe claim under the key "<job>/<the slot's Unix seconds>"
// in the Claimer's namespace, leased for the lease and kept for twice
// that: an instance that dies mid-run leaves the slot to expire, and the
// next slot runs again.
type StoreLocker struct {
	Store Claimer
	// Now is the claim's time. Default time.Now.
	Now func() time.Time
}

// Lock implements Locker: only a fresh claim holds the slot.
func (l StoreLocker) Lock(ctx context.Context, job string, slot time.Time, lease time.Duration) (bool, error) {
	now := l.Now
	if now == nil {
		now = time.Now
	}
	key := fmt.Sprintf("%s/%d", job, slot.Unix())
	res, err := l.Store.Claim(ctx, key, dedupe.Claim{
		Fingerprint: dedupe.FingerprintOf([]byte(job)),
		Token:       rand.Text(), // unique: a claim by the same token is a retry, and wins
		Lease:       lease,
		Retention:   2 * lease,
		Now:         now(),
	})
	if err != nil {
		return false, err
	}
	return res.Status == dedupe.Claimed, nil
}
