package integration

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/hookgate/hookgate/verify"
)

// TestPubSubThroughTheBinary runs scheme pubsub in a gateway whose only
// trust root is a test CA, with a stand-in for Google's JWKS: a push
// whose token hookgate sign minted is forwarded once and its redelivery
// replayed; a token of another service account or audience, none, and
// keys that cannot be fetched are refused, each with its reason.
func TestPubSubThroughTheBinary(t *testing.T) {
	const account = "push@my-project.iam.gserviceaccount.com"
	const audience = "https://hooks.example.com/pubsub"
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tp, err := (&jose.JSONWebKey{Key: &k.PublicKey}).Thumbprint(crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: &k.PublicKey, KeyID: base64.RawURLEncoding.EncodeToString(tp), Algorithm: "RS256", Use: "sig"}}})
	if err != nil {
		t.Fatal(err)
	}
	google := newKeyHost(t, map[string]string{"/oauth2/v3/certs": string(jwks)})
	up := newUpstream(t, nil)
	site := fmt.Sprintf(`
	handle /pubsub {
		webhook_verify pubsub {
			audience %[1]s
			service_accounts %[2]s
			jwks_url %[3]s/oauth2/v3/certs
		}
		webhook_dedupe
		reverse_proxy %[4]s
	}
	handle /pubsub-nokeys {
		webhook_verify pubsub {
			audience %[1]s
			service_accounts %[2]s
			jwks_url %[3]s/gone
		}
		reverse_proxy %[4]s
	}`, audience, account, google.URL, up.Addr())
	g := startGateway(t, site, gatewayOptions{Env: []string{"SSL_CERT_FILE=" + google.rootFile}})

	push := `{"message":{"data":"eyJsZWFybmVyIjoibC0xIn0=","messageId":"2070443601311540","publishTime":"2026-12-06T12:00:00Z"},"subscription":"projects/my-project/subscriptions/enrollments"}`
	keyPEM := pkcs8PEM(t, k)
	for i := range 2 {
		out, err := exec.Command(binary, "sign", "--scheme", "pubsub", "--secret", keyPEM, "--key-id", account,
			"--url", audience, "--send", g.URL+"/pubsub", push).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "200 OK") || (i == 1) != strings.Contains(string(out), "Idempotent-Replayed: true") {
			t.Fatalf("hookgate sign --send, %d: %v\n%s", i+1, err, out)
		}
	}
	if n := up.count(); n != 1 {
		t.Fatalf("the upstream got the push %d times, want once", n)
	}
	if n := google.count("/oauth2/v3/certs"); n != 1 {
		t.Fatalf("the JWKS was fetched %d times, want once", n)
	}

	token := func(account, audience string) http.Header {
		s, err := verify.NewSigner("pubsub", keyPEM, account)
		if err != nil {
			t.Fatal(err)
		}
		h, err := s.SignRequest(verify.Request{URL: audience, Body: []byte(push)}, "", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	for _, tt := range []struct {
		name, path string
		h          http.Header
		status     int
		reason     string
	}{
		{"another service account", "/pubsub", token("other@my-project.iam.gserviceaccount.com", audience), 401, "bad_signature"},
		{"another audience", "/pubsub", token(account, "https://elsewhere.example/pubsub"), 401, "bad_signature"},
		{"no token", "/pubsub", http.Header{}, 400, "missing_header"},
		{"keys that cannot be fetched", "/pubsub-nokeys", token(account, audience), 503, "key_unavailable"},
	} {
		status, rh, got := post(t, g.URL+tt.path, tt.h, []byte(strings.Replace(push, "2070443601311540", "99", 1)))
		if status != tt.status || problemBody(t, status, rh, got) != tt.reason {
			t.Errorf("%s: %d %s, want %d %s", tt.name, status, got, tt.status, tt.reason)
		}
	}
	if n := up.count(); n != 1 {
		t.Fatalf("a refused push was forwarded: the upstream has %d requests", n)
	}
}
