// Package portal issues and checks portal links: a URL to the console
// that carries a signed, expiring token scoped to one tenant, which a
// platform hands to its customer so that the customer sees and replays
// its own dead letters and deliveries, and nothing else, without an
// operator's password.
//
// A token is base64url(JSON {"t","g","exp"}) "." base64url(HMAC-SHA256):
// the tenant, its generation, and when it expires (unix seconds), MACed
// under the portal key. Revoking a tenant's links ends its generation: a
// token of an ended generation is refused. A generation ended is kept in
// the store for good (Keep), so every instance sharing the store refuses
// it, and a link issued after a revocation is of the next generation.
//
// Opening a link exchanges its token for a session cookie (HttpOnly,
// SameSite=Strict, Secure on https) and moves on to the same page without
// the token (Open). The package imports no Caddy and no console: the
// webhook_console handler calls Open and scopes the console to the
// tenant.
package portal

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hookgate/hookgate/sender"
)

// Bounds of a link's lifetime.
const (
	DefaultTTL = time.Hour
	MinTTL     = time.Minute
	MaxTTL     = 30 * 24 * time.Hour
)

// MinKeyLen is the shortest portal key, in bytes.
const MinKeyLen = 32

// maxToken bounds a token read from a request, before any decoding.
const maxToken = 512

// maxGenerations bounds the revocations of one tenant that Issue and
// Revoke step over to find the current generation.
const maxGenerations = 10000

// Why a token is refused. Each is a 403; their texts hold no secret.
var (
	ErrInvalid = errors.New("this portal link is not valid: it was changed, cut short, or signed under another key")
	ErrExpired = errors.New("this portal link has expired: ask for a new one")
	ErrRevoked = errors.New("this portal link was revoked: ask for a new one")
)

// ErrRefused is a link Issue does not make: its ttl out of bounds, or a
// tenant whose links were revoked too often.
var ErrRefused = errors.New("portal link refused")

// Store keeps the generations revoked: hookgate's store (bbolt or Redis)
// is one. A kept value never changes.
type Store interface {
	// Keep stores value under key unless one is kept there already.
	Keep(ctx context.Context, key string, value []byte) ([]byte, error)
	// Kept returns the value kept under key, nil when there is none.
	Kept(ctx context.Context, key string) ([]byte, error)
}

// Links issues, checks and revokes portal links.
type Links struct {
	key   []byte
	base  *url.URL
	store Store
	now   func() time.Time
}

// New returns the links signed under key (at least MinKeyLen bytes) that
// point at portalURL (an absolute http or https URL: the console that
// serves them), their revocations kept in store; now is the clock (nil:
// time.Now). An error never quotes the key.
func New(key, portalURL string, store Store, now func() time.Time) (*Links, error) {
	if len(key) < MinKeyLen {
		return nil, fmt.Errorf("portal_key: at least %d bytes (e.g. openssl rand -base64 32); this one has %d", MinKeyLen, len(key))
	}
	u, err := url.Parse(portalURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("portal_url %q: want an absolute http:// or https:// URL without a query, the page webhook_console { portal } serves", portalURL)
	}
	if now == nil {
		now = time.Now
	}
	return &Links{key: []byte(key), base: u, store: store, now: now}, nil
}

// claims are what a token says.
type claims struct {
	Tenant     string `json:"t"`
	Generation uint64 `json:"g"`
	Expires    int64  `json:"exp"`
}

// Link is an issued link.
type Link struct {
	URL       string    `json:"url"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Issue returns a link to tenant's portal that expires after ttl (0:
// DefaultTTL; MinTTL to MaxTTL).
func (l *Links) Issue(ctx context.Context, tenant string, ttl time.Duration) (Link, error) {
	if err := sender.CheckTenant(tenant); err != nil {
		return Link{}, err
	}
	if ttl == 0 {
		ttl = DefaultTTL
	}
	if ttl < MinTTL || ttl > MaxTTL {
		return Link{}, fmt.Errorf("%w: ttl %s: want %s to %s", ErrRefused, ttl, MinTTL, MaxTTL)
	}
	gen, err := l.generation(ctx, tenant)
	if err != nil {
		return Link{}, err
	}
	exp := l.now().Add(ttl).Truncate(time.Second)
	token := l.sign(claims{Tenant: tenant, Generation: gen, Expires: exp.Unix()})
	u := *l.base
	u.RawQuery = url.Values{"token": {token}}.Encode()
	return Link{URL: u.String(), ExpiresAt: exp.UTC()}, nil
}

// Revoke ends the links of tenant issued so far: each is refused from
// now on, on every instance sharing the store. A link issued after it is
// good.
func (l *Links) Revoke(ctx context.Context, tenant string) error {
	if err := sender.CheckTenant(tenant); err != nil {
		return err
	}
	gen, err := l.generation(ctx, tenant)
	if err != nil {
		return err
	}
	_, err = l.store.Keep(ctx, revokedKey(tenant, gen), []byte(l.now().UTC().Format(time.RFC3339)))
	return err
}

// Check returns the tenant of a token and when it expires: ErrInvalid
// for a token that is not one this key signed, ErrExpired, ErrRevoked,
// or the store's error.
func (l *Links) Check(ctx context.Context, token string) (string, time.Time, error) {
	c, err := l.parse(token)
	if err != nil {
		return "", time.Time{}, err
	}
	exp := time.Unix(c.Expires, 0)
	if !l.now().Before(exp) {
		return "", time.Time{}, ErrExpired
	}
	revoked, err := l.store.Kept(ctx, revokedKey(c.Tenant, c.Generation))
	switch {
	case err != nil:
		return "", time.Time{}, err
	case revoked != nil:
		return "", time.Time{}, ErrRevoked
	}
	return c.Tenant, exp, nil
}

// generation is tenant's current generation: the first not revoked.
func (l *Links) generation(ctx context.Context, tenant string) (uint64, error) {
	for g := uint64(0); g < maxGenerations; g++ {
		v, err := l.store.Kept(ctx, revokedKey(tenant, g))
		if err != nil || v == nil {
			return g, err
		}
	}
	return 0, fmt.Errorf("%w: tenant %q: its links were revoked %d times: no more can be issued", ErrRefused, tenant, maxGenerations)
}

func revokedKey(tenant string, gen uint64) string {
	return "portal:" + tenant + ":revoked:" + strconv.FormatUint(gen, 10)
}

// mac is the token's MAC of its encoded claims.
func (l *Links) mac(payload string) []byte {
	m := hmac.New(sha256.New, l.key)
	m.Write([]byte("hookgate portal link v1\n"))
	m.Write([]byte(payload))
	return m.Sum(nil)
}

func (l *Links) sign(c claims) string {
	b, _ := json.Marshal(c)
	payload := base64.RawURLEncoding.EncodeToString(b)
	return payload + "." + base64.RawURLEncoding.EncodeToString(l.mac(payload))
}

// parse checks a token's MAC, then reads its claims: anything that is not
// a token this key signed, whole, is ErrInvalid.
func (l *Links) parse(token string) (claims, error) {
	var c claims
	if len(token) > maxToken {
		return c, ErrInvalid
	}
	payload, sig, ok := strings.Cut(token, ".")
	if !ok {
		return c, ErrInvalid
	}
	got, err := base64.RawURLEncoding.Strict().DecodeString(sig)
	if err != nil || !hmac.Equal(got, l.mac(payload)) {
		return c, ErrInvalid
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(payload)
	if err != nil || json.Unmarshal(b, &c) != nil || sender.CheckTenant(c.Tenant) != nil || c.Expires <= 0 {
		return claims{}, ErrInvalid
	}
	return c, nil
}
