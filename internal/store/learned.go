package store

import "context"

// Learned keeps the secrets a scheme's handshake gives (asana's) in the
// store, kept once and for good under <scheme>:<endpoint>: a
// verify.Learned. The secret is never logged.
type Learned struct {
	Store  *Lazy
	Scheme string
}

// Learn keeps secret as endpoint's unless one is kept, and returns the
// one kept.
func (l Learned) Learn(ctx context.Context, endpoint, secret string) (string, error) {
	kept, err := l.Store.Keep(ctx, l.Scheme+":"+endpoint, []byte(secret))
	return string(kept), err
}

// Secret reads endpoint's kept secret, "" when none is.
func (l Learned) Secret(ctx context.Context, endpoint string) (string, error) {
	kept, err := l.Store.Kept(ctx, l.Scheme+":"+endpoint)
	return string(kept), err
}
