package verify

import (
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/hex"
	"sync"
)

// scope is one secret's fingerprint, which dedupe folds into the keys it
// derives from a body (Delivery.SecretFingerprint): two endpoints behind
// one store that receive byte-identical bodies under different secrets
// (two Meta apps, say) then keep apart. It is derived on first use,
// by the first request the secret verifies: the derivation is slow on
// purpose, since the fingerprint lands in the store's key names.
type scope struct {
	once   sync.Once
	secret []byte
	fp     string
}

// The fingerprint's derivation: PBKDF2-HMAC-SHA256 of the secret under a
// fixed label, cut to 64 bits. A fingerprint read from the store costs an
// attacker scopeIterations HMACs per guessed secret, where one captured
// signature costs one: it tells less about a weak secret than a single
// signed request does.
var scopeLabel = []byte("hookgate dedupe key scope, v1")

const (
	scopeIterations = 1 << 15
	scopeBytes      = 8
)

func newScope(secret []byte) *scope { return &scope{secret: secret} }

// fingerprint returns the secret's fingerprint, 16 hex digits.
func (s *scope) fingerprint() string {
	s.once.Do(func() {
		// 16 bytes and a 29-byte label: within what FIPS 140-only mode
		// allows, so Key cannot fail.
		dk, err := pbkdf2.Key(sha256.New, string(s.secret), scopeLabel, scopeIterations, 16)
		if err != nil {
			panic("verify: deriving a secret's fingerprint: " + err.Error())
		}
		s.fp = hex.EncodeToString(dk[:scopeBytes])
	})
	return s.fp
}
