package verify

// Google Cloud Pub/Sub push subscriptions with authentication: each push
// carries "Authorization: Bearer <OIDC ID token>", an RS256 JWT Google
// signs for the subscription's service account, whose keys Google
// publishes as a JWKS (fetch.go fetches and caches it as its
// Cache-Control says). The token authenticates the sender, not the body:
// the body's message ID is the delivery ID.
// https://cloud.google.com/pubsub/docs/authenticate-push-subscriptions

import (
	"context"
	"crypto"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/tidwall/gjson"
)

// PubSub configures scheme pubsub.
type PubSub struct {
	// Audience is the aud the token must carry: the push subscription's
	// audience, by default its push endpoint's URL. Required.
	Audience string `json:"audience,omitempty"`
	// ServiceAccounts are the service accounts whose tokens are
	// accepted: the subscription's. Required.
	ServiceAccounts []string `json:"service_accounts,omitempty"`
	// JWKSURL is where Google's keys are fetched. Default:
	// https://www.googleapis.com/oauth2/v3/certs.
	JWKSURL string `json:"jwks_url,omitempty"`
}

// googleJWKS is where Google publishes the keys of its ID tokens.
const googleJWKS = "https://www.googleapis.com/oauth2/v3/certs"

// googleIssuers are the iss an ID token of Google's carries.
var googleIssuers = []string{"https://accounts.google.com", "accounts.google.com"}

// Bounds on what the JWKS's Cache-Control may ask: a key set is kept at
// least a minute (a JWKS host cannot be asked at every request) and at
// most a day; an hour when it says nothing.
const (
	jwksMinTTL     = time.Minute
	jwksMaxTTL     = 24 * time.Hour
	jwksDefaultTTL = time.Hour
	// pubsubTokenMax bounds the token read: Google's are about 1 KiB.
	pubsubTokenMax = 8 << 10
)

// pubsubScheme names the scheme; its requests take their own path
// through Verify and SignRequest (Verifier.pubsub).
type pubsubScheme struct{}

func (pubsubScheme) name() string                 { return "pubsub" }
func (pubsubScheme) defaultFuture() time.Duration { return DefaultTolerance }
func (pubsubScheme) key(string) ([]byte, error) {
	return nil, errors.New("pubsub verifies with Google's published keys")
}
func (pubsubScheme) parse(Request) (parsed, error) {
	return parsed{}, errors.New("pubsub is verified by pubsub.verify")
}
func (pubsubScheme) mac(hash.Hash, parsed, []byte)      {}
func (pubsubScheme) header(http.Header, parsed, []byte) {}

// prepare checks that the request to sign has a URL: its audience.
func (pubsubScheme) prepare(r Request, _ *parsed) error {
	if u, err := url.Parse(r.URL); err != nil || u.Scheme == "" || u.Host == "" {
		return errors.New("pubsub's token names its audience, the push endpoint's URL: give the URL")
	}
	return nil
}

// pubsub verifies scheme pubsub's pushes.
type pubsub struct {
	cfg   PubSub
	fetch *fetcher
	// signer signs (NewSigner): an RSA private key, as Google's, for the
	// service account account.
	signer  *rsa.PrivateKey
	account string
}

// keySet is a fetched JWKS's keys, and when it was fetched.
type keySet struct {
	keys []jose.JSONWebKey
	at   time.Time
}

func newPubSub(secrets []string, opts Options) (*pubsub, error) {
	cfg := PubSub{}
	if opts.PubSub != nil {
		cfg = *opts.PubSub
	}
	if cfg.JWKSURL == "" {
		cfg.JWKSURL = googleJWKS
	}
	p := &pubsub{cfg: cfg, fetch: newFetcher(opts.Client)}
	signing := len(secrets) > 0 && cfg.Audience == ""
	switch u, err := url.Parse(cfg.JWKSURL); {
	case err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil:
		return nil, fmt.Errorf("scheme pubsub: jwks_url %q is not an https URL", cfg.JWKSURL)
	case !signing && cfg.Audience == "":
		return nil, errors.New("scheme pubsub needs audience: the push subscription's audience (by default, its push endpoint's URL)")
	case !signing && len(cfg.ServiceAccounts) == 0:
		return nil, errors.New("scheme pubsub needs service_accounts: the push subscription's service account")
	}
	var err error
	if p.signer, err = rsaSigner(secrets, "scheme pubsub verifies with Google's keys, without a secret"); err != nil {
		return nil, err
	}
	return p, nil
}

// pubsubClaims are the claims of Google's ID tokens that are checked.
type pubsubClaims struct {
	jwt.Claims
	Email         string `json:"email"`
	EmailVerified bool   `json:"email_verified"`
}

// verify checks r's token at now, and reads the message ID.
func (p *pubsub) verify(r Request, now time.Time, past, future time.Duration) (Delivery, error) {
	auth, err := single(r.Header, "Authorization")
	if err != nil {
		return Delivery{}, err
	}
	if auth == "" {
		return Delivery{}, missing("Authorization")
	}
	scheme, raw, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || raw == "" || len(raw) > pubsubTokenMax {
		return Delivery{}, malformed("Authorization", "is not a Bearer token")
	}
	tok, err := jwt.ParseSigned(raw, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil || len(tok.Headers) != 1 || tok.Headers[0].KeyID == "" {
		return Delivery{}, malformed("Authorization", "is not an RS256 JWT with a key ID")
	}
	key, err := p.key(r.Context, tok.Headers[0].KeyID, now)
	if err != nil {
		return Delivery{}, err
	}
	var c pubsubClaims
	if err := tok.Claims(key, &c); err != nil {
		return Delivery{}, ErrBadSignature
	}
	switch {
	case !slices.Contains(googleIssuers, c.Issuer):
		return Delivery{}, fmt.Errorf("%w: the token's issuer is not Google's", ErrBadSignature)
	case !c.Audience.Contains(p.cfg.Audience):
		return Delivery{}, fmt.Errorf("%w: the token's audience is not this endpoint's", ErrBadSignature)
	case !slices.Contains(p.cfg.ServiceAccounts, c.Email) || !c.EmailVerified:
		return Delivery{}, fmt.Errorf("%w: the token's service account is not among service_accounts", ErrBadSignature)
	case c.Expiry == nil || c.IssuedAt == nil:
		return Delivery{}, malformed("Authorization", "is a token without exp or iat")
	}
	exp, iat := c.Expiry.Time(), c.IssuedAt.Time()
	switch {
	case now.After(exp.Add(past)):
		return Delivery{}, fmt.Errorf("%w: the token expired %s ago, tolerance %s", ErrTimestampOutOfTolerance, now.Sub(exp).Truncate(time.Second), past)
	case future >= 0 && iat.After(now.Add(future)):
		return Delivery{}, fmt.Errorf("%w: the token is issued %s in the future, tolerance %s", ErrTimestampOutOfTolerance, iat.Sub(now).Truncate(time.Second), future)
	case c.NotBefore != nil && future >= 0 && c.NotBefore.Time().After(now.Add(future)):
		return Delivery{}, fmt.Errorf("%w: the token is not valid yet", ErrTimestampOutOfTolerance)
	}
	msg := gjson.GetBytes(r.Body, "message")
	id := msg.Get("messageId").String()
	if id == "" {
		id = msg.Get("message_id").String()
	}
	if !gjson.ValidBytes(r.Body) || id == "" {
		return Delivery{}, fmt.Errorf("%w: not a Pub/Sub push: no message.messageId", ErrMalformedBody)
	}
	return Delivery{ID: id, Timestamp: iat, Key: KeyID}, nil
}

// key is the RSA key kid names in Google's key set. A kid the cached set
// lacks fetches the set again (Google rotates its keys), at most once a
// minute; a failed fetch leaves the cached set in use.
func (p *pubsub) key(ctx context.Context, kid string, now time.Time) (*rsa.PublicKey, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	v, err := p.fetch.get(ctx, p.cfg.JWKSURL, now, readJWKS(now))
	if err != nil {
		return nil, err
	}
	set := v.(*keySet)
	if k := set.rsa(kid); k != nil {
		return k, nil
	}
	if now.Sub(set.at) < jwksMinTTL {
		return nil, fmt.Errorf("%w: no key %q in the JWKS", ErrBadSignature, kid)
	}
	if v, err = p.fetch.refresh(ctx, p.cfg.JWKSURL, now, readJWKS(now)); err != nil {
		return nil, err
	}
	if k := v.(*keySet).rsa(kid); k != nil {
		return k, nil
	}
	return nil, fmt.Errorf("%w: no key %q in the JWKS", ErrBadSignature, kid)
}

// rsa is the RSA key kid names, nil for none.
func (s *keySet) rsa(kid string) *rsa.PublicKey {
	for _, k := range s.keys {
		if k.KeyID == kid {
			if pub, ok := k.Key.(*rsa.PublicKey); ok {
				return pub
			}
		}
	}
	return nil
}

// readJWKS reads a JWKS fetched at now, kept as its Cache-Control says,
// within bounds. A key that does not parse (a type go-jose does not
// know) is left out, not the set.
func readJWKS(now time.Time) parseFunc {
	return func(body []byte, h http.Header) (any, time.Duration, error) {
		var raw struct{ Keys []json.RawMessage }
		if err := json.Unmarshal(body, &raw); err != nil {
			return nil, 0, errors.New("the answer is not a JWKS")
		}
		set := &keySet{at: now}
		for _, r := range raw.Keys {
			var k jose.JSONWebKey
			if json.Unmarshal(r, &k) == nil {
				set.keys = append(set.keys, k)
			}
		}
		if len(set.keys) == 0 {
			return nil, 0, errors.New("the JWKS holds no key")
		}
		return set, min(max(maxAge(h.Get("Cache-Control"), jwksDefaultTTL), jwksMinTTL), jwksMaxTTL), nil
	}
}

// maxAge is Cache-Control's max-age, or def when it has none.
func maxAge(cc string, def time.Duration) time.Duration {
	for _, d := range strings.Split(cc, ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(strings.ToLower(d)), "max-age="); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
				return time.Duration(min(n, int64(jwksMaxTTL/time.Second))) * time.Second
			}
		}
	}
	return def
}

// sign writes the Authorization a push of Google's carries: an RS256 ID
// token for p's service account, audience r's URL, issued at ts for an
// hour, its kid the key's JWK thumbprint.
func (p *pubsub) sign(r Request, ts time.Time) (http.Header, error) {
	if p.signer == nil || p.account == "" {
		return nil, errors.New("pubsub signs with an RSA private key (PKCS#8 PEM) for a service account")
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: p.signer, KeyID: jwkKeyID(&p.signer.PublicKey)}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return nil, err
	}
	c := pubsubClaims{Claims: jwt.Claims{Issuer: googleIssuers[0], Subject: "1" + strings.Repeat("0", 20), Audience: jwt.Audience{r.URL},
		IssuedAt: jwt.NewNumericDate(ts), Expiry: jwt.NewNumericDate(ts.Add(time.Hour))}, Email: p.account, EmailVerified: true}
	tok, err := jwt.Signed(signer).Claims(c).Serialize()
	if err != nil {
		return nil, err
	}
	return http.Header{"Authorization": {"Bearer " + tok}}, nil
}

// jwkKeyID is the key ID pubsub's signer gives pub: its RFC 7638
// thumbprint, base64url.
func jwkKeyID(pub *rsa.PublicKey) string {
	tp, _ := (&jose.JSONWebKey{Key: pub}).Thumbprint(crypto.SHA256) // an RSA public key always has one
	return base64.RawURLEncoding.EncodeToString(tp)
}
