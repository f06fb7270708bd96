package dedupe

import (
	"crypto/sha256"
	"encoding/hex"
)

// Fingerprint is the SHA-256 of a request body: a key reused with another
// body is told apart from a genuine duplicate by it.
type Fingerprint [sha256.Size]byte

// FingerprintOf returns body's fingerprint.
func FingerprintOf(body []byte) Fingerprint { return sha256.Sum256(body) }

// String returns the fingerprint in hex.
func (f Fingerprint) String() string { return hex.EncodeToString(f[:]) }

// ParseFingerprint parses a hex fingerprint.
func ParseFingerprint(s string) (Fingerprint, bool) {
	var f Fingerprint
	if hex.DecodedLen(len(s)) != len(f) {
		return f, false
	}
	_, err := hex.Decode(f[:], []byte(s))
	return f, err == nil
}
