package verify

// The secrets an endpoint's handshake gives, rather than the operator:
// Asana's. Creating an Asana webhook, Asana POSTs to the target with
// X-Hook-Secret: <secret> and expects it echoed, 200; then it signs each
// delivery with that secret (X-Hook-Signature, hex HMAC-SHA256 of the
// body). The handshake is not signed, so the first one an endpoint sees
// is trusted (trust on first use): its secret is stored, for good, and a
// later handshake with another secret is refused. An endpoint is the path
// the request arrived at: one Asana webhook per path.

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/hookgate/hookgate/internal/problem"
)

// Learned keeps the secrets handshakes give, one per endpoint: the first
// stored is the endpoint's for good. It is the caller's store (hookgate's
// state store), shared by every instance.
type Learned interface {
	// Learn stores secret as endpoint's unless one is stored already,
	// and returns the one stored: secret, or the earlier one.
	Learn(ctx context.Context, endpoint, secret string) (string, error)
	// Secret returns endpoint's stored secret, "" when none is.
	Secret(ctx context.Context, endpoint string) (string, error)
}

// ErrStoreUnavailable means a learned secret could not be read or stored
// (503 store_unavailable): try again.
var ErrStoreUnavailable = errors.New("store unavailable")

// learningSchemes are the schemes whose secrets a handshake gives.
var learningSchemes = []string{"asana"}

// The handshake's header, and its bound: Asana's secrets are 64 hex
// digits; any token of 1 to 128 characters is taken.
const (
	hookSecretHeader = "X-Hook-Secret"
	hookSecretMax    = 128
)

// learnedCacheMax bounds the learned secrets held in memory; past it,
// each further endpoint's is read from the store at each request.
const learnedCacheMax = 1024

// learned is a Verifier's learned secrets: the store, and the secrets
// read from it, keyed once (a stored secret never changes).
type learned struct {
	store  Learned
	newMAC func([]byte) *macKey
	mu     sync.RWMutex
	keys   map[string]*macKey // by endpoint
}

// key returns endpoint's learned key, nil when it has none.
func (l *learned) key(ctx context.Context, endpoint string) (*macKey, error) {
	l.mu.RLock()
	k := l.keys[endpoint]
	l.mu.RUnlock()
	if k != nil {
		return k, nil
	}
	secret, err := l.store.Secret(ctx, endpoint)
	if err != nil {
		return nil, fmt.Errorf("%w: reading the endpoint's learned secret", ErrStoreUnavailable)
	}
	if secret == "" {
		return nil, nil
	}
	return l.remember(endpoint, secret), nil
}

// remember keys endpoint's secret, and holds it while there is room.
func (l *learned) remember(endpoint, secret string) *macKey {
	l.mu.Lock()
	defer l.mu.Unlock()
	if k := l.keys[endpoint]; k != nil {
		return k
	}
	k := l.newMAC([]byte(secret))
	if len(l.keys) < learnedCacheMax {
		l.keys[endpoint] = k
	}
	return k
}

// hookSecret answers Asana's handshake: the secret of X-Hook-Secret,
// echoed, when it is one of the configured secrets, or the endpoint's
// learned one, or stored as the endpoint's now that it has none; a
// secret other than the endpoint's is refused, 409 handshake_refused.
// Neither an answer's detail nor an error holds the secret.
func (v *Verifier) hookSecret(r Request) Answer {
	secret, err := single(r.Header, hookSecretHeader)
	if err != nil || secret == "" || len(secret) > hookSecretMax || !crcAlphabet(secret) {
		return refuse(problem.MalformedHeader, "X-Hook-Secret must be one value of 1 to 128 characters of A-Z, a-z, 0-9, _, = and -")
	}
	echo := Answer{Status: http.StatusOK, Header: http.Header{hookSecretHeader: {secret}}}
	for _, k := range v.keys {
		if subtle.ConstantTimeCompare(k, []byte(secret)) == 1 {
			return echo // the operator's own
		}
	}
	if v.learned == nil {
		return refuse(problem.HandshakeRefused, "X-Hook-Secret is not a configured secret, and this endpoint learns none")
	}
	ctx := r.Context
	if ctx == nil {
		ctx = context.Background()
	}
	stored, err := v.learned.store.Learn(ctx, r.Endpoint, secret)
	if err != nil {
		return refuse(problem.StoreUnavailable, "the endpoint's secret could not be stored: try again")
	}
	if subtle.ConstantTimeCompare([]byte(stored), []byte(secret)) != 1 {
		return refuse(problem.HandshakeRefused, "this endpoint holds the secret of an earlier handshake: a new Asana webhook needs a new path")
	}
	v.learned.remember(r.Endpoint, stored)
	return echo
}
