package integration

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"testing"
	"time"
)

// pkcs8PEM is a private key as openssl genpkey writes it.
func pkcs8PEM(t *testing.T, key any) string {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// TestPublicKeyProviders runs discord and sendgrid in a gateway, each
// configured with the provider's public key as the provider's console
// shows it: a request signed with the private key is forwarded once, a
// Discord PING is answered with a PONG and never forwarded, and a request
// signed with another key is refused.
func TestPublicKeyProviders(t *testing.T) {
	edPub, edPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecPub, err := x509.MarshalPKIXPublicKey(&ec.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	up := newUpstream(t, nil)
	site := fmt.Sprintf(`
	handle /discord {
		webhook_verify discord {
			secret %[1]s
		}
		webhook_dedupe
		reverse_proxy %[3]s
	}
	handle /sendgrid {
		webhook_verify sendgrid {
			secret %[2]s
		}
		webhook_dedupe
		reverse_proxy %[3]s
	}`, hex.EncodeToString(edPub), base64.StdEncoding.EncodeToString(ecPub), up.Addr())
	g := startGateway(t, site, gatewayOptions{})
	discord := signer(t, "discord", pkcs8PEM(t, edPriv))
	sendgrid := signer(t, "sendgrid", pkcs8PEM(t, ec))
	_, otherPriv, _ := ed25519.GenerateKey(rand.Reader)
	other := signer(t, "discord", pkcs8PEM(t, otherPriv))
	now := time.Now()

	ping := []byte(`{"application_id":"1","id":"ping-1","type":1}`)
	status, _, got := post(t, g.URL+"/discord", discord.Sign("", now, ping), ping)
	if status != 200 || string(got) != `{"type":1}` {
		t.Errorf("the PING: %d %s, want 200 {\"type\":1}", status, got)
	}
	if status, _, _ := post(t, g.URL+"/discord", other.Sign("", now, ping), ping); status != 401 {
		t.Errorf("a PING signed with another key: %d, want 401", status)
	}
	if n := up.count(); n != 0 {
		t.Fatalf("the upstream got %d requests during the handshake, want 0", n)
	}
	for _, tt := range []struct {
		path string
		h    func() []byte
	}{
		{"/discord", func() []byte {
			return []byte(`{"application_id":"1","id":"786008729715212338","type":2,"data":{"name":"enroll"}}`)
		}},
		{"/sendgrid", func() []byte {
			return []byte(`[{"email":"a@example.com","event":"delivered","sg_event_id":"ZGVsaXZlcmVk"}]`)
		}},
	} {
		body := tt.h()
		v := discord
		if tt.path == "/sendgrid" {
			v = sendgrid
		}
		h := v.Sign("", now, body)
		before := up.count()
		for i := range 2 {
			status, rh, got := post(t, g.URL+tt.path, h, body)
			if status != 200 || (i == 1) != (rh.Get("Idempotent-Replayed") == "true") {
				t.Errorf("%s, send %d: %d %s, Idempotent-Replayed %q", tt.path, i+1, status, got, rh.Get("Idempotent-Replayed"))
			}
		}
		if n := up.count() - before; n != 1 {
			t.Errorf("%s: the upstream got it %d times, want 1", tt.path, n)
		}
	}
}
