package dedupe

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// Store keeps the dedupe state of each key. Every method is atomic: in
// Redis one command (a claim's SET NX GET) or one Lua script, in bbolt one
// transaction. Times come from the caller's clock, never from the store's.
type Store interface {
	// Claim claims key for a forward, or reports why it cannot be claimed.
	// With no entry, or with a claim of the same fingerprint whose lease
	// has expired, it writes a claim {fp, token, lease until now+lease} kept
	// for retention and answers Claimed (TookOver for an expired lease).
	// Otherwise it writes nothing and answers InFlight (a live claim of the
	// same fingerprint), Recorded (with the record), or Mismatch (an entry
	// of another fingerprint).
	Claim(ctx context.Context, key string, c Claim) (ClaimResult, error)

	// Record turns the claim held by token into a record kept until
	// now+retention. It fails with ErrClaimLost when token no longer holds
	// the claim.
	Record(ctx context.Context, key, token string, rec Record, retention time.Duration, now time.Time) error

	// Release deletes the claim held by token, so the next copy is
	// forwarded afresh. A claim that token no longer holds is left alone.
	Release(ctx context.Context, key, token string) error

	// Get reads key's entry without changing it; an expired entry is
	// absent.
	Get(ctx context.Context, key string, now time.Time) (Entry, error)

	// Forget deletes key's entry, claimed or recorded, so the next copy is
	// forwarded as new (an operator's decision). It reports whether there
	// was one.
	Forget(ctx context.Context, key string) (bool, error)
}

// Claim is what Store.Claim writes.
type Claim struct {
	Fingerprint Fingerprint
	Token       string
	Lease       time.Duration // the claim's lease from now
	Retention   time.Duration // how long the claim entry is kept
	Now         time.Time
}

// ClaimStatus is the answer of Store.Claim.
type ClaimStatus int

// The claim answers.
const (
	Claimed  ClaimStatus = iota + 1 // the caller holds the claim: forward
	TookOver                        // claimed over an expired lease of the same fingerprint: forward again
	InFlight                        // a live claim of the same fingerprint is in the way
	Recorded                        // a record of the same fingerprint: replay it
	Mismatch                        // the key is held by another fingerprint
)

var claimStatusNames = [...]string{"", "claimed", "took_over", "in_flight", "recorded", "mismatch"}

func (s ClaimStatus) String() string {
	if int(s) < len(claimStatusNames) {
		return claimStatusNames[s]
	}
	return "unknown"
}

// ClaimResult is Store.Claim's answer.
type ClaimResult struct {
	Status ClaimStatus
	// LeaseUntil is when the claim in the way expires (InFlight).
	LeaseUntil time.Time
	// Record is the recorded response, and Expires when it expires
	// (Recorded).
	Record  *Record
	Expires time.Time
}

// EntryState is the state of a key.
type EntryState int

// The key states.
const (
	Absent EntryState = iota
	StateClaimed
	StateRecorded
)

// Entry is a key's entry as Store.Get reads it.
type Entry struct {
	State       EntryState
	Fingerprint Fingerprint
	LeaseUntil  time.Time // StateClaimed
	Record      *Record   // StateRecorded
	Expires     time.Time // when the entry is forgotten
}

// Record is a recorded final response.
type Record struct {
	Status int
	Header http.Header // end-to-end headers, no Date
	Body   []byte
	// BodyOmitted is set when the body was over the record limit: the
	// outcome is still final, so it is recorded without its body.
	BodyOmitted bool
}

// ErrClaimLost means a Record came with a token that no longer holds the
// claim: the lease expired and another forward took over.
var ErrClaimLost = errors.New("claim lost: the lease expired and another forward took over")
