package verify

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/hookgate/hookgate/internal/problem"
)

// fakeLearned is a Learned in memory, first writer wins, that counts its
// reads and fails while broken.
type fakeLearned struct {
	mu      sync.Mutex
	secrets map[string]string
	reads   int
	broken  bool
}

func newFakeLearned() *fakeLearned { return &fakeLearned{secrets: map[string]string{}} }

func (f *fakeLearned) Learn(_ context.Context, endpoint, secret string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.broken {
		return "", errors.New("store down")
	}
	if s, ok := f.secrets[endpoint]; ok {
		return s, nil
	}
	f.secrets[endpoint] = secret
	return secret, nil
}

func (f *fakeLearned) Secret(_ context.Context, endpoint string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.broken {
		return "", errors.New("store down")
	}
	return f.secrets[endpoint], nil
}

// The X-Hook-Secret of Asana's own handshake example, and another.
const (
	asanaSecret = "b537207f20cbfa02357cf448134da559e8bd39d61597dcd5631b8012eae53e81"
	asanaOther  = "0f8e4ad8b5c1d8f0c9a1e6b2a7d3c4e5f60718293a4b5c6d7e8f90a1b2c3d4e5"
)

func asanaHandshake(endpoint string, secrets ...string) Request {
	return Request{Method: http.MethodPost, URL: "https://gw.example" + endpoint, Endpoint: endpoint,
		Header: http.Header{"X-Hook-Secret": secrets}}
}

// asanaDelivery is body to endpoint, signed with secret as Asana signs.
func asanaDelivery(t *testing.T, endpoint, secret, body string) Request {
	t.Helper()
	h := mustNew(t, "asana", []string{secret}, Options{}).Sign("", t0, []byte(body))
	return Request{Method: http.MethodPost, URL: "https://gw.example" + endpoint, Endpoint: endpoint, Header: h, Body: []byte(body)}
}

// TestAsanaLearnsOnFirstUse: the first handshake of an endpoint stores
// its secret and is answered 200 with it echoed; the same secret again
// (Asana may retry) is answered alike; another secret is refused, 409
// handshake_refused, and the first kept. Another endpoint learns its own.
func TestAsanaLearnsOnFirstUse(t *testing.T) {
	t.Parallel()
	store := newFakeLearned()
	v := mustNew(t, "asana", nil, Options{Learned: store})

	a, ok := v.Handshake(asanaHandshake("/asana", asanaSecret), t0)
	if !ok || a.Status != http.StatusOK || a.Header.Get("X-Hook-Secret") != asanaSecret || a.Reason != (problem.Reason{}) {
		t.Fatalf("first handshake: ok = %v, answer = %+v, want 200 with the secret echoed", ok, a)
	}
	if store.secrets["/asana"] != asanaSecret {
		t.Fatal("the first handshake's secret was not stored")
	}
	if a, _ := v.Handshake(asanaHandshake("/asana", asanaSecret), t0); a.Status != http.StatusOK || a.Header.Get("X-Hook-Secret") != asanaSecret {
		t.Errorf("the same handshake again: %+v, want 200", a)
	}
	a, _ = v.Handshake(asanaHandshake("/asana", asanaOther), t0)
	if a.Status != http.StatusConflict || a.Reason != problem.HandshakeRefused || a.Header.Get("X-Hook-Secret") != "" {
		t.Errorf("another secret: %+v, want 409 %s and nothing echoed", a, problem.HandshakeRefused.Code)
	}
	if strings.Contains(string(a.Body), asanaOther) || strings.Contains(string(a.Body), asanaSecret) {
		t.Errorf("the refusal's detail holds a secret: %q", a.Body)
	}
	if store.secrets["/asana"] != asanaSecret {
		t.Error("a second handshake replaced the stored secret")
	}
	if a, _ := v.Handshake(asanaHandshake("/asana/2", asanaOther), t0); a.Status != http.StatusOK {
		t.Errorf("another endpoint's first handshake: %+v, want 200", a)
	}
	// A request without X-Hook-Secret is no handshake: Verify judges it.
	if _, ok := v.Handshake(asanaDelivery(t, "/asana", asanaSecret, `{"events":[]}`), t0); ok {
		t.Error("a delivery was answered as the handshake")
	}
}

// TestAsanaHandshakeBounds: the unsigned header is held to 1 to 128 token
// characters, one value; anything else is 400 malformed_header, and
// nothing is stored.
func TestAsanaHandshakeBounds(t *testing.T) {
	t.Parallel()
	store := newFakeLearned()
	v := mustNew(t, "asana", nil, Options{Learned: store})
	if a, _ := v.Handshake(asanaHandshake("/max", strings.Repeat("a", hookSecretMax)), t0); a.Status != http.StatusOK {
		t.Errorf("a secret of %d characters: %+v, want 200", hookSecretMax, a)
	}
	for _, secrets := range [][]string{{""}, {strings.Repeat("a", hookSecretMax+1)}, {"<script>"}, {"a b"}, {"a/b+c"}, {asanaSecret, asanaOther}} {
		a, ok := v.Handshake(asanaHandshake("/bounds", secrets...), t0)
		if !ok || a.Status != http.StatusBadRequest || a.Reason != problem.MalformedHeader {
			t.Errorf("X-Hook-Secret %.20q: ok = %v, answer = %+v, want 400 %s", secrets, ok, a, problem.MalformedHeader.Code)
		}
	}
	if _, ok := store.secrets["/bounds"]; ok {
		t.Error("a malformed handshake stored a secret")
	}
}

// TestAsanaDeliveries: a delivery verifies under its endpoint's learned
// secret, read from the store once; not before the handshake, not on
// another endpoint, not with a changed body; keyed for dedupe by its body
// within the learned secret's scope.
func TestAsanaDeliveries(t *testing.T) {
	t.Parallel()
	store := newFakeLearned()
	v := mustNew(t, "asana", nil, Options{Learned: store})
	const body = `{"events":[{"action":"changed","resource":{"gid":"1337","resource_type":"task"}}]}`
	genuine := asanaDelivery(t, "/asana", asanaSecret, body)
	if _, err := v.Verify(genuine, t0); !errors.Is(err, ErrBadSignature) {
		t.Errorf("before the handshake: %v, want ErrBadSignature", err)
	}
	if a, _ := v.Handshake(asanaHandshake("/asana", asanaSecret), t0); a.Status != http.StatusOK {
		t.Fatalf("handshake: %+v", a)
	}
	fresh := mustNew(t, "asana", nil, Options{Learned: store}) // another instance, or a restart: reads the store
	for i := range 3 {
		d, err := fresh.Verify(genuine, t0)
		if err != nil {
			t.Fatalf("delivery %d: %v", i, err)
		}
		if d.Key != KeyBody || d.SecretFingerprint == "" || d.DedupeKey(func() string { return "sum" }) == "" {
			t.Errorf("delivery %d: %+v, want keyed by its body within the secret's scope", i, d)
		}
	}
	if store.reads != 2 { // one by Verify before the handshake, one by fresh
		t.Errorf("store reads = %d, want 2: a learned secret is read once", store.reads)
	}
	changed := genuine
	changed.Body = []byte(body + " ")
	if _, err := fresh.Verify(changed, t0); !errors.Is(err, ErrBadSignature) {
		t.Errorf("a changed body: %v, want ErrBadSignature", err)
	}
	other := asanaDelivery(t, "/elsewhere", asanaSecret, body)
	if _, err := fresh.Verify(other, t0); !errors.Is(err, ErrBadSignature) {
		t.Errorf("another endpoint: %v, want ErrBadSignature", err)
	}
	if _, err := fresh.Verify(asanaDelivery(t, "/asana", asanaOther, body), t0); !errors.Is(err, ErrBadSignature) {
		t.Errorf("forged under another secret: %v, want ErrBadSignature", err)
	}
	unsigned := genuine
	unsigned.Header = http.Header{}
	reads := store.reads
	if _, err := fresh.Verify(unsigned, t0); !errors.Is(err, ErrMissingHeader) || store.reads != reads {
		t.Errorf("unsigned: %v after %d store reads, want ErrMissingHeader and none", err, store.reads-reads)
	}
}

// TestAsanaConfiguredSecret: an operator's secret line verifies, and its
// handshake is echoed without storing anything; without a store, another
// secret is refused. Without either, asana does not provision.
func TestAsanaConfiguredSecret(t *testing.T) {
	t.Parallel()
	v := mustNew(t, "asana", []string{asanaSecret}, Options{})
	if a, _ := v.Handshake(asanaHandshake("/asana", asanaSecret), t0); a.Status != http.StatusOK || a.Header.Get("X-Hook-Secret") != asanaSecret {
		t.Errorf("the configured secret's handshake: %+v, want 200", a)
	}
	if a, _ := v.Handshake(asanaHandshake("/asana", asanaOther), t0); a.Status != http.StatusConflict || a.Reason != problem.HandshakeRefused {
		t.Errorf("another secret, nothing to learn with: %+v, want 409", a)
	}
	if _, err := v.Verify(asanaDelivery(t, "/asana", asanaSecret, `{"events":[]}`), t0); err != nil {
		t.Errorf("a delivery under the configured secret: %v", err)
	}
	store := newFakeLearned()
	both := mustNew(t, "asana", []string{asanaSecret}, Options{Learned: store})
	if a, _ := both.Handshake(asanaHandshake("/asana", asanaSecret), t0); a.Status != http.StatusOK || len(store.secrets) != 0 {
		t.Errorf("the configured secret's handshake, with a store: %+v, stored %d; want 200, none stored", a, len(store.secrets))
	}
	if _, err := New("asana", nil, Options{}); err == nil {
		t.Error("asana with neither a secret nor a store: no error")
	}
	if _, err := New("github", nil, Options{Learned: store}); err == nil {
		t.Error("learned secrets under github: no error")
	}
}

// TestAsanaStoreUnavailable: a store that fails answers a handshake 503
// store_unavailable and a delivery the same (Rejection), never an accept.
func TestAsanaStoreUnavailable(t *testing.T) {
	t.Parallel()
	store := newFakeLearned()
	store.broken = true
	v := mustNew(t, "asana", nil, Options{Learned: store})
	if a, _ := v.Handshake(asanaHandshake("/asana", asanaSecret), t0); a.Status != http.StatusServiceUnavailable || a.Reason != problem.StoreUnavailable {
		t.Errorf("handshake: %+v, want 503 %s", a, problem.StoreUnavailable.Code)
	}
	_, err := v.Verify(asanaDelivery(t, "/asana", asanaSecret, `{"events":[]}`), t0)
	if reason, _ := Rejection(err); !errors.Is(err, ErrStoreUnavailable) || reason != problem.StoreUnavailable {
		t.Errorf("delivery: %v (%s), want ErrStoreUnavailable, 503", err, reason.Code)
	}
}

// FuzzAsanaHandshake: whatever X-Hook-Secret holds, the handshake answers
// 200 with it echoed only when it is 1 to 128 token characters and the
// endpoint's (stored now, or before); else a refusal, with nothing
// stored and the header in no detail. Seeded with Asana's example.
func FuzzAsanaHandshake(f *testing.F) {
	f.Add(asanaSecret, asanaOther)
	f.Add("", "a")
	f.Add(strings.Repeat("f", hookSecretMax+1), "x")
	f.Add("<script>alert(1)</script>", "a\r\nb")
	f.Fuzz(func(t *testing.T, first, second string) {
		store := newFakeLearned()
		v := mustNew(t, "asana", nil, Options{Learned: store})
		for i, secret := range []string{first, second} {
			a, ok := v.Handshake(asanaHandshake("/f", secret), t0)
			valid := secret != "" && len(secret) <= hookSecretMax && crcAlphabet(secret)
			stored := store.secrets["/f"]
			switch {
			case !ok:
				t.Fatalf("handshake %d: not answered", i)
			case a.Status == http.StatusOK && (!valid || stored != secret || a.Header.Get("X-Hook-Secret") != secret):
				t.Fatalf("handshake %d: 200 for %q, stored %q", i, secret, stored)
			case a.Status != http.StatusOK && valid && stored == secret:
				t.Fatalf("handshake %d: %+v for the endpoint's own secret", i, a)
			case a.Status != http.StatusOK && len(secret) >= 8 && strings.Contains(string(a.Body), secret): // a short one may be any word
				t.Fatalf("handshake %d: the refusal's detail holds the header", i)
			case !valid && stored == secret && secret != "":
				t.Fatalf("handshake %d: stored a malformed secret", i)
			}
		}
	})
}
