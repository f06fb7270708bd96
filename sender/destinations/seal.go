package destinations

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// A sealed value is "aesgcm:" and the base64 (standard, padded) of a
// 12-byte random nonce and the AES-256-GCM ciphertext and tag, its
// additional data the destination's name and the field ("billing
// secret"), so that a sealed value copied to another record or field
// does not open. Without a key, values are kept as "plain:" and the
// value.
const (
	sealedPrefix = "aesgcm:"
	plainPrefix  = "plain:"
)

// KeyLen is the secrets key's length: AES-256.
const KeyLen = 32

// sealer seals and opens the secrets of the records.
type sealer struct{ aead cipher.AEAD } // nil: no key

// newSealer returns the sealer under key, 32 bytes; none without a key.
func newSealer(key []byte) (sealer, error) {
	if key == nil {
		return sealer{}, nil
	}
	if len(key) != KeyLen {
		return sealer{}, fmt.Errorf("secrets_key: want %d bytes (the base64 of 32 random bytes: openssl rand -base64 32), have %d", KeyLen, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return sealer{}, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return sealer{}, err
	}
	return sealer{aead: aead}, nil
}

// ParseKey reads a secrets key: the standard base64 of 32 bytes.
func ParseKey(s string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil || len(key) != KeyLen {
		return nil, fmt.Errorf("secrets_key: want the base64 of %d random bytes (openssl rand -base64 32)", KeyLen)
	}
	return key, nil
}

// errOpen means a sealed value that does not open: another key, or a
// value changed. It names no value.
var errOpen = errors.New("a sealed secret does not open under secrets_key: is it the key the destination was made under?")

// seal seals value, the field of the destination name.
func (s sealer) seal(name, field, value string) string {
	if s.aead == nil {
		return plainPrefix + value
	}
	nonce := make([]byte, s.aead.NonceSize())
	_, _ = rand.Read(nonce) // crypto/rand.Read never fails
	out := s.aead.Seal(nonce, nonce, []byte(value), aad(name, field))
	return sealedPrefix + base64.StdEncoding.EncodeToString(out)
}

// open opens what seal sealed. A plain value opens whatever the key (it
// was kept before the key was set: the next change seals it); a sealed
// one needs the key.
func (s sealer) open(name, field, value string) (string, error) {
	if v, ok := strings.CutPrefix(value, plainPrefix); ok {
		return v, nil
	}
	raw, ok := strings.CutPrefix(value, sealedPrefix)
	if !ok {
		return "", errors.New("a stored secret is neither sealed nor plain")
	}
	if s.aead == nil {
		return "", errors.New("a secret is sealed, and secrets_key is not set: set the key it was sealed under")
	}
	b, err := base64.StdEncoding.DecodeString(raw)
	if err != nil || len(b) < s.aead.NonceSize() {
		return "", errOpen
	}
	plain, err := s.aead.Open(nil, b[:s.aead.NonceSize()], b[s.aead.NonceSize():], aad(name, field))
	if err != nil {
		return "", errOpen
	}
	return string(plain), nil
}

func aad(name, field string) []byte { return []byte(name + " " + field) }
