package redisstore

import (
	"strconv"
	"strings"

	"github.com/hookgate/hookgate/dedupe"
)

// An entry is one STRING (see entryKey), laid out so that the record and
// release scripts find the state and the token at fixed offsets:
//
//	byte 0       'c' claimed, 'r' recorded
//	byte 1       '1' when the claim took over an expired lease, else '0'
//	bytes 2-33   the body fingerprint (SHA-256, raw)
//	byte 34      n, the token's length (a token is at most 255 bytes)
//	35 … 35+n    the fencing token
//	then         claimed:  lease until ':' expiry   (decimal unix ms)
//	             recorded: expiry ':' the record     (dedupe.MarshalRecord)
//
// The claim writes it whole (SET NX); the record script keeps bytes 1 to
// 35+n and replaces the rest.
const (
	stateClaimed  = 'c'
	stateRecorded = 'r'
	tokenAt       = 2 + len(dedupe.Fingerprint{}) // the token length byte
	maxToken      = 255
)

// entry is an entry's fields, its strings slices of the stored value.
type entry struct {
	recorded   bool
	tookOver   bool
	fp         dedupe.Fingerprint
	token      string
	leaseUntil int64 // unix ms, claimed only
	expires    int64 // unix ms
	rec        string
}

// appendClaim appends the entry of a claim (not a take-over) to b.
func appendClaim(b []byte, fp *dedupe.Fingerprint, token string, leaseUntil, expires int64) []byte {
	b = append(b, stateClaimed, '0')
	b = append(b, fp[:]...)
	b = append(b, byte(len(token)))
	b = append(b, token...)
	b = strconv.AppendInt(b, leaseUntil, 10)
	b = append(b, ':')
	return strconv.AppendInt(b, expires, 10)
}

// claimSize bounds the length of appendClaim's entry.
func claimSize(token string) int { return tokenAt + 1 + len(token) + 2*20 + 1 }

// parseEntry reads a stored entry; ok is false when v is not one.
func parseEntry(v string) (e entry, ok bool) {
	if len(v) <= tokenAt {
		return entry{}, false
	}
	switch v[0] {
	case stateClaimed:
	case stateRecorded:
		e.recorded = true
	default:
		return entry{}, false
	}
	e.tookOver = v[1] == '1'
	copy(e.fp[:], v[2:tokenAt])
	n := int(v[tokenAt])
	rest := v[tokenAt+1:]
	if n > len(rest) {
		return entry{}, false
	}
	e.token, rest = v[tokenAt+1:tokenAt+1+n], rest[n:]
	first, rest, found := strings.Cut(rest, ":")
	if !found {
		return entry{}, false
	}
	a, err := strconv.ParseInt(first, 10, 64)
	if err != nil {
		return entry{}, false
	}
	if e.recorded {
		e.expires, e.rec = a, rest
		return e, true
	}
	e.leaseUntil = a
	if e.expires, err = strconv.ParseInt(rest, 10, 64); err != nil {
		return entry{}, false
	}
	return e, true
}
