package verify

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// googleToken is a Google-signed ID token of a service account, and the
// JWKS whose key signed it (google-auth-library-java's tests;
// testdata/pubsub/SOURCES.md).
const (
	googleTokenAudience = "https://example.com/path"
	googleTokenAccount  = "integration-tests@chingor-test.iam.gserviceaccount.com"
)

var googleTokenIssued = time.Unix(1587626288, 0)

const pushBody = `{"message":{"attributes":{"k":"v"},"data":"aGVsbG8=","messageId":"136969346945","message_id":"136969346945","publishTime":"2020-04-23T07:20:00Z"},"subscription":"projects/p/subscriptions/s"}`

func newPubSubVerifier(t *testing.T, cfg PubSub, client *http.Client) *Verifier {
	t.Helper()
	v, err := New("pubsub", nil, Options{PubSub: &cfg, Client: client})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func bearer(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }

// TestPubSubVector verifies Google's own token against Google's JWKS
// (served by a stand-in at Google's URL), and refuses it for another
// audience or service account, expired, changed, or without its key.
func TestPubSubVector(t *testing.T) {
	tok := strings.TrimSpace(string(readTestdata(t, "pubsub/pubsub-token.txt")))
	jwks := string(readTestdata(t, "pubsub/pubsub-jwks.json"))
	at := googleTokenIssued.Add(10 * time.Minute)
	stand, client := newStand(map[string]string{googleJWKS: jwks})
	cfg := PubSub{Audience: googleTokenAudience, ServiceAccounts: []string{"other@p.iam.gserviceaccount.com", googleTokenAccount}}
	v := newPubSubVerifier(t, cfg, client)
	d, err := v.Verify(Request{Header: bearer(tok), Body: []byte(pushBody)}, at)
	if err != nil {
		t.Fatalf("Google's token: %v", err)
	}
	if d.ID != "136969346945" || d.Key != KeyID || d.Scheme != "pubsub" || !d.Timestamp.Equal(googleTokenIssued) {
		t.Fatalf("delivery = %+v", d)
	}

	for name, tt := range map[string]struct {
		cfg  PubSub
		h    http.Header
		body string
		at   time.Time
		want error
	}{
		"another audience":        {cfg: PubSub{Audience: "https://gw.example/push", ServiceAccounts: cfg.ServiceAccounts}, want: ErrBadSignature},
		"another service account": {cfg: PubSub{Audience: googleTokenAudience, ServiceAccounts: []string{"other@p.iam.gserviceaccount.com"}}, want: ErrBadSignature},
		"expired":                 {at: googleTokenIssued.Add(time.Hour + DefaultTolerance + time.Second), want: ErrTimestampOutOfTolerance},
		"issued in the future":    {at: googleTokenIssued.Add(-DefaultTolerance - time.Second), want: ErrTimestampOutOfTolerance},
		"a changed claim":         {h: bearer(changeClaims(t, tok)), want: ErrBadSignature},
		"no token":                {h: http.Header{}, want: ErrMissingHeader},
		"two tokens":              {h: http.Header{"Authorization": {"Bearer " + tok, "Bearer " + tok}}, want: ErrMalformedHeader},
		"basic auth":              {h: http.Header{"Authorization": {"Basic " + tok}}, want: ErrMalformedHeader},
		"not a JWT":               {h: bearer("abc"), want: ErrMalformedHeader},
		"no message ID":           {body: `{"message":{"data":"aGVsbG8="}}`, want: ErrMalformedBody},
	} {
		c, h, body, now := cfg, bearer(tok), pushBody, at
		if tt.cfg.Audience != "" {
			c = tt.cfg
		}
		if tt.h != nil {
			h = tt.h
		}
		if tt.body != "" {
			body = tt.body
		}
		if !tt.at.IsZero() {
			now = tt.at
		}
		if _, err := newPubSubVerifier(t, c, client).Verify(Request{Header: h, Body: []byte(body)}, now); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", name, err, tt.want)
		}
	}
	if n := stand.count(googleJWKS); n > 12 {
		t.Errorf("the JWKS was fetched %d times for 12 verifiers", n)
	}

	// Google's keys cannot be fetched: 503, never an accept.
	_, down := newStand(nil)
	_, err = newPubSubVerifier(t, cfg, down).Verify(Request{Header: bearer(tok), Body: []byte(pushBody)}, at)
	if reason, _ := Rejection(err); !errors.Is(err, ErrKeyUnavailable) || reason.Status != http.StatusServiceUnavailable {
		t.Fatalf("JWKS unavailable: %v (%v)", err, reason)
	}
}

// changeClaims is tok with its audience changed, its signature kept.
func changeClaims(t *testing.T, tok string) string {
	t.Helper()
	parts := strings.Split(tok, ".")
	claims, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(claims), "example.com", "example.org", 1)
	parts[1] = base64.RawURLEncoding.EncodeToString([]byte(changed))
	return strings.Join(parts, ".")
}

// testJWKS is the JWKS of keys, as the stand-in serves it.
func testJWKS(t testing.TB, keys ...*rsa.PrivateKey) string {
	t.Helper()
	var set jose.JSONWebKeySet
	for _, k := range keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: &k.PublicKey, KeyID: jwkKeyID(&k.PublicKey), Algorithm: "RS256", Use: "sig"})
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func rsaPKCS8(t testing.TB, k *rsa.PrivateKey) string {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// TestPubSubSignAndRotation signs pushes as Google does (hookgate sign)
// and verifies them; the JWKS is kept as its Cache-Control says, and a
// token under a key the cached set lacks (Google rotated) fetches the
// set again, at most once a minute.
func TestPubSubSignAndRotation(t *testing.T) {
	const account = "push@proj.iam.gserviceaccount.com"
	const endpoint = "https://gw.example/pubsub"
	k1, _ := rsa.GenerateKey(rand.Reader, 2048)
	k2, _ := rsa.GenerateKey(rand.Reader, 2048)
	s1, err := NewSigner("pubsub", rsaPKCS8(t, k1), account)
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := NewSigner("pubsub", rsaPKCS8(t, k2), account)
	stand, client := newStand(map[string]string{"https://keys.example/jwks": testJWKS(t, k1)})
	v := newPubSubVerifier(t, PubSub{Audience: endpoint, ServiceAccounts: []string{account}, JWKSURL: "https://keys.example/jwks"}, client)
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	push := func(s *Verifier, at time.Time) error {
		h, err := s.SignRequest(Request{URL: endpoint, Body: []byte(pushBody)}, "", at)
		if err != nil {
			t.Fatal(err)
		}
		_, err = v.Verify(Request{Header: h, Body: []byte(pushBody)}, at)
		return err
	}
	if err := push(s1, now); err != nil {
		t.Fatalf("signed push: %v", err)
	}
	if err := push(s1, now.Add(30*time.Minute)); err != nil || stand.count("https://keys.example/jwks") != 1 {
		t.Fatalf("within the hour (no Cache-Control): %v, fetched %d times", err, stand.count("https://keys.example/jwks"))
	}
	// Google rotates: k2's token. Within a minute of the last fetch, the
	// set is not fetched again.
	stand.pages["https://keys.example/jwks"] = testJWKS(t, k1, k2)
	if err := push(s2, now.Add(30*time.Second)); !errors.Is(err, ErrBadSignature) || stand.count("https://keys.example/jwks") != 1 {
		t.Fatalf("a new key within a minute: %v, fetched %d times", err, stand.count("https://keys.example/jwks"))
	}
	if err := push(s2, now.Add(2*time.Minute)); err != nil || stand.count("https://keys.example/jwks") != 2 {
		t.Fatalf("a new key after a minute: %v, fetched %d times", err, stand.count("https://keys.example/jwks"))
	}
	// A kid nobody knows, when the JWKS host is down: the set in use
	// stays, and genuine pushes still verify.
	delete(stand.pages, "https://keys.example/jwks")
	k3, _ := rsa.GenerateKey(rand.Reader, 2048)
	s3, _ := NewSigner("pubsub", rsaPKCS8(t, k3), account)
	if err := push(s3, now.Add(4*time.Minute)); !errors.Is(err, ErrKeyUnavailable) {
		t.Fatalf("an unknown kid with the JWKS host down: %v", err)
	}
	if err := push(s2, now.Add(4*time.Minute)); err != nil {
		t.Fatalf("a genuine push after a failed refresh: %v", err)
	}
	// A JWKS with a key go-jose does not know keeps its other keys.
	stand.pages["https://keys.example/jwks"] = strings.Replace(testJWKS(t, k1), `{"keys":[`, `{"keys":[{"kty":"OKP","crv":"X448","x":"AA","kid":"odd"},`, 1)
	fresh := newPubSubVerifier(t, PubSub{Audience: endpoint, ServiceAccounts: []string{account}, JWKSURL: "https://keys.example/jwks"}, client)
	h, _ := s1.SignRequest(Request{URL: endpoint, Body: []byte(pushBody)}, "", now)
	if _, err := fresh.Verify(Request{Header: h, Body: []byte(pushBody)}, now); err != nil {
		t.Fatalf("a JWKS with an unknown key type: %v", err)
	}
	if _, err := s1.SignRequest(Request{Body: []byte(pushBody)}, "", now); err == nil {
		t.Fatal("signed without an audience URL")
	}
}

// TestMaxAge reads Cache-Control as Google writes it.
func TestMaxAge(t *testing.T) {
	for cc, want := range map[string]time.Duration{
		"public, max-age=19745, must-revalidate, no-transform": 19745 * time.Second,
		"":                      time.Hour,
		"no-cache":              time.Hour,
		"max-age=-1":            time.Hour,
		"MAX-AGE=60":            time.Minute,
		"max-age=9999999999999": jwksMaxTTL,
	} {
		if got := maxAge(cc, time.Hour); got != want {
			t.Errorf("maxAge(%q) = %s, want %s", cc, got, want)
		}
	}
}

// TestPubSubConfig refuses what scheme pubsub cannot use.
func TestPubSubConfig(t *testing.T) {
	for name, opts := range map[string]Options{
		"no audience":         {PubSub: &PubSub{ServiceAccounts: []string{"a@b"}}},
		"no service accounts": {PubSub: &PubSub{Audience: "https://gw/"}},
		"an http JWKS":        {PubSub: &PubSub{Audience: "https://gw/", ServiceAccounts: []string{"a@b"}, JWKSURL: "http://keys/"}},
	} {
		if _, err := New("pubsub", nil, opts); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := New("pubsub", []string{"s3cret"}, Options{PubSub: &PubSub{Audience: "https://gw/", ServiceAccounts: []string{"a@b"}}}); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("an HMAC secret: %v", err)
	}
	if _, err := New("stripe", []string{"s"}, Options{PubSub: &PubSub{Audience: "https://gw/"}}); err == nil {
		t.Error("audience accepted for stripe")
	}
	if _, err := NewSigner("pubsub", "k", ""); err == nil {
		t.Error("a signer without a service account")
	}
}
