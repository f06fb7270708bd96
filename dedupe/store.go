package dedupe

import (
	"context"
	"encoding/binary"
	"errors"
	"net/http"
	"time"

	"github.com/hookgate/hookgate/internal/wire"
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

// A record's stored form, shared by the backends, is compact binary (it is
// decoded on every replay):
//
//	version byte (1) | flags byte (1: body omitted) | uvarint status |
//	uvarint header count | per header: string name, uvarint value count,
//	string values | body (the rest)
//
// where a string is a uvarint length and its bytes.
const recordVersion = 1

var errBadRecord = errors.New("malformed stored record")

// MarshalRecord encodes rec for a store.
func MarshalRecord(rec Record) []byte {
	n := 16 + len(rec.Body)
	for k, vs := range rec.Header {
		n += len(k) + 4
		for _, v := range vs {
			n += len(v) + 2
		}
	}
	b := make([]byte, 0, n)
	var flags byte
	if rec.BodyOmitted {
		flags = 1
	}
	b = append(b, recordVersion, flags)
	b = binary.AppendUvarint(b, uint64(rec.Status))
	b = binary.AppendUvarint(b, uint64(len(rec.Header)))
	for k, vs := range rec.Header {
		b = wire.AppendString(b, k)
		b = binary.AppendUvarint(b, uint64(len(vs)))
		for _, v := range vs {
			b = wire.AppendString(b, v)
		}
	}
	return append(b, rec.Body...)
}

// UnmarshalRecord decodes what MarshalRecord encoded.
func UnmarshalRecord(b []byte) (*Record, error) {
	d := wire.Decoder{Buf: b}
	if len(b) < 2 || b[0] != recordVersion {
		return nil, errBadRecord
	}
	rec := &Record{BodyOmitted: b[1]&1 != 0}
	d.Buf = b[2:]
	status := d.Uvarint()
	nh := d.Uvarint()
	if d.Err || status > 999 || nh > uint64(len(d.Buf)) {
		return nil, errBadRecord
	}
	rec.Status = int(status)
	rec.Header = make(http.Header, nh)
	for range nh {
		k := d.LenString()
		nv := d.Uvarint()
		if d.Err || nv > uint64(len(d.Buf)) {
			return nil, errBadRecord
		}
		vs := make([]string, nv)
		for i := range vs {
			vs[i] = d.LenString()
		}
		rec.Header[k] = vs
	}
	if d.Err {
		return nil, errBadRecord
	}
	if len(d.Buf) > 0 {
		rec.Body = append([]byte(nil), d.Buf...)
	}
	return rec, nil
}
