package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"hash"
	"sync"
)

// macKey is one secret's HMAC, keyed once. hmac.New hashes the key into
// its inner and outer pads, two compressions and five allocations; each
// verification instead takes a keyed state from the pool, whose Reset
// restores the pads without rehashing them. A state never leaves the
// goroutine that took it until it is put back.
type macKey struct {
	raw   []byte
	pool  sync.Pool // of *keyedMAC
	scope *scope    // the secret's fingerprint (scope.go)
}

// keyedMAC is a keyed HMAC state, with room for its sum.
type keyedMAC struct {
	hash.Hash
	sum []byte
}

func newMACKey(newHash func() hash.Hash, raw []byte) *macKey {
	k := &macKey{raw: raw, scope: newScope(raw)}
	k.pool.New = func() any {
		m := hmac.New(newHash, raw)
		return &keyedMAC{Hash: m, sum: make([]byte, 0, m.Size())}
	}
	return k
}

// get takes a keyed state, reset to the key alone.
func (k *macKey) get() *keyedMAC {
	m := k.pool.Get().(*keyedMAC)
	m.Reset()
	return m
}

// mac is the sum of what m was written, in m's own buffer: valid until m
// is put back.
func (m *keyedMAC) mac() []byte {
	m.sum = m.Sum(m.sum[:0])
	return m.sum
}

// put gives m back; neither m nor its sum may be used after.
func (k *macKey) put(m *keyedMAC) { k.pool.Put(m) }

// hasher is a scheme whose HMAC is not HMAC-SHA256.
type hasher interface {
	newHash() hash.Hash
}

func newHashOf(s scheme) func() hash.Hash {
	if h, ok := s.(hasher); ok {
		return h.newHash
	}
	return sha256.New
}
