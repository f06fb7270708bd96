package verify

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// sendgridVectorBody is the payload of sendgrid-go's own test
// (helpers/eventwebhook/eventwebhook_test.go, generateTestPayload): Go's
// JSON of its one event, keys in order, then "\r\n", as SendGrid sends it.
const sendgridVectorBody = `[{"email":"hello@world.com","event":"dropped","reason":"Bounced Address","sg_event_id":"ZHJvcC0xMDk5NDkxOS1MUnpYbF9OSFN0T0doUTRrb2ZTbV9BLTA",` +
	`"sg_message_id":"LRzXl_NHStOGhQ4kofSm_A.filterdrecv-p3mdw1-756b745b58-kmzbl-18-5F5FC76C-9.0","smtp-id":"<LRzXl_NHStOGhQ4kofSm_A@ismtpd0039p1iad1.sendgrid.net>","timestamp":1600112492}]` + "\r\n"

// TestSendGridVector: sendgrid-go@v3.16.1's own vector (helpers/
// eventwebhook/eventwebhook_test.go: publicKey, signature, timestamp)
// verifies under the verification key as SendGrid shows it, and as PEM;
// a changed body, timestamp or signature does not; a stale one is out of
// the window.
func TestSendGridVector(t *testing.T) {
	const (
		key = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1flpVKS3GRqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g=="
		sig = "MEUCIGHQVtGj+Y3LkG9fLcxf3qfI10QysgDWmMOVmxG0u6ZUAiEAyBiXDWzM+uOe5W0JuG+luQAbPIqHh89M15TluLtEZtM="
		ts  = "1600112502"
	)
	now := time.Unix(1600112510, 0)
	h := http.Header{}
	h.Set("X-Twilio-Email-Event-Webhook-Signature", sig)
	h.Set("X-Twilio-Email-Event-Webhook-Timestamp", ts)
	pemKey := "-----BEGIN PUBLIC KEY-----\n" + key + "\n-----END PUBLIC KEY-----\n"
	for _, secret := range []string{key, pemKey} {
		v := mustNew(t, "sendgrid", []string{testP256Key2, secret}, Options{}) // rotation: any key
		d, err := v.Verify(Request{Header: h, Body: []byte(sendgridVectorBody)}, now)
		if err != nil || d.Key != KeyBody || d.SecretFingerprint == "" {
			t.Fatalf("the vector: %+v, %v", d, err)
		}
		if _, err := v.Verify(Request{Header: h, Body: []byte(strings.Replace(sendgridVectorBody, "dropped", "dropped!", 1))}, now); !errors.Is(err, ErrBadSignature) {
			t.Errorf("a changed body: %v, want ErrBadSignature", err)
		}
		later := h.Clone()
		later.Set("X-Twilio-Email-Event-Webhook-Timestamp", "1600112503")
		if _, err := v.Verify(Request{Header: later, Body: []byte(sendgridVectorBody)}, now); !errors.Is(err, ErrBadSignature) {
			t.Errorf("a changed timestamp: %v, want ErrBadSignature", err)
		}
		if _, err := v.Verify(Request{Header: h, Body: []byte(sendgridVectorBody)}, now.Add(time.Hour)); !errors.Is(err, ErrTimestampOutOfTolerance) {
			t.Errorf("an hour later: %v, want ErrTimestampOutOfTolerance", err)
		}
	}
	if v := mustNew(t, "sendgrid", []string{key}, Options{}); v.CanSign() {
		t.Error("a public key signs")
	}
}

// TestPublicKeyRefusals: what is not a key of the scheme is refused when
// the config loads, naming what is wanted, never echoing the secret.
func TestPublicKeyRefusals(t *testing.T) {
	for _, tt := range []struct{ scheme, secret, want string }{
		{"discord", "not hex", "64 hex digits"},
		{"discord", strings.Repeat("ab", 31), "64 hex digits"},
		{"discord", testP256Key1, "an Ed25519 key"},
		{"sendgrid", testEd25519Key1, "ECDSA P-256 key"},
		{"sendgrid", "bm90IGEga2V5", "ECDSA P-256 public key"},
		{"sendgrid", "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----", "PKCS#8"},
	} {
		_, err := New(tt.scheme, []string{tt.secret}, Options{})
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), tt.secret) {
			t.Errorf("New(%s, %.20q) = %v, want an error with %q", tt.scheme, tt.secret, err, tt.want)
		}
	}
}

// TestDiscordVector: a PING signed with testEd25519Key1, whose signature
// Discord's official discord-interactions@4.4.0 verifyKey accepted (and
// refused over the body with a space added), verifies under the public
// key as Discord's portal shows it (hex); the PING is answered with a
// PONG; the private key signs the very same headers (Ed25519 is
// deterministic).
func TestDiscordVector(t *testing.T) {
	const (
		pub  = "2c5dde499bc8908aacbe00eeb00908c2d5dfe96b8504a7f4e372f8daf9a23879"
		ts   = "1700000000"
		sig  = "3f20560904769f6ee1dc9a98fb1144be2136cb42cece5017c815169959d357c79515df1e740b515dcb4154bb1bc7983073834d73c83a1a09f726c0f6c9f0c50a"
		body = `{"app_permissions":"442368","application_id":"123456789012345678","id":"786008729715212338","token":"A_UNIQUE_TOKEN","type":1,"user":{"id":"53908232506183680","username":"Mason"},"version":1}`
	)
	h := http.Header{}
	h.Set("X-Signature-Ed25519", sig)
	h.Set("X-Signature-Timestamp", ts)
	v := mustNew(t, "discord", []string{pub}, Options{})
	d, err := v.Verify(Request{Header: h, Body: []byte(body)}, t0)
	if err != nil || d.ID != "786008729715212338" || d.Key != KeyID {
		t.Fatalf("the vector: %+v, %v", d, err)
	}
	if _, err := v.Verify(Request{Header: h, Body: []byte(body + " ")}, t0); !errors.Is(err, ErrBadSignature) {
		t.Errorf("another body: %v, want ErrBadSignature", err)
	}
	a, ok := v.Handshake(Request{Method: http.MethodPost, Header: h, Body: []byte(body)}, t0)
	if !ok || a.Status != 200 || string(a.Body) != `{"type":1}` {
		t.Errorf("the PING: %v %d %s, want a PONG", ok, a.Status, a.Body)
	}
	forged := h.Clone()
	forged.Set("X-Signature-Ed25519", strings.Repeat("0", 128))
	if _, ok := v.Handshake(Request{Method: http.MethodPost, Header: forged, Body: []byte(body)}, t0); ok {
		t.Error("a mis-signed PING was answered")
	}
	signer := mustNew(t, "discord", []string{testEd25519Key1}, Options{})
	signed := signer.Sign("", time.Unix(1700000000, 0), []byte(body))
	if signed.Get("X-Signature-Ed25519") != sig || signed.Get("X-Signature-Timestamp") != ts {
		t.Errorf("signed %v, want the vector's headers", signed)
	}
}

// TestTelnyxVector: a call.answered event signed with the RFC 8032 test 2
// seed, which Telnyx's telnyx@7.24.0 TelnyxWebhook.verify accepted (and
// refused with the body changed), verifies under the public key as
// Telnyx's portal shows it (base64), keyed by the event's data.id; the
// seed's private key signs the same headers.
func TestTelnyxVector(t *testing.T) {
	const (
		pub  = "PUAXw+hDiVqStwqnTRt+vJyYLM8uxJaMwM1V8Sr0Zgw="
		sig  = "DCg+LuVaXZlLxJmCyBBYgNXBOmFqiFcaOfX4LgOVDHxaa2alTqZ78FWntjK8Hsa1euaWTV8A4iqYbE6ot8PpDg=="
		body = `{"data":{"event_type":"call.answered","id":"0ccc7b54-4df3-4bca-a65a-3da1ecc777f0","occurred_at":"2018-02-02T22:25:27.521992Z","payload":{"call_control_id":"v2:T02llQxIyaRkhfRKxgAP8nY511EhFLizdvdUKJiSw8d6A9BborherQ"},"record_type":"event"}}`
	)
	h := http.Header{}
	h.Set("Telnyx-Signature-Ed25519", sig)
	h.Set("Telnyx-Timestamp", "1700000000")
	v := mustNew(t, "telnyx", []string{pub}, Options{})
	now := time.Unix(1700000005, 0)
	d, err := v.Verify(Request{Header: h, Body: []byte(body)}, now)
	if err != nil || d.ID != "0ccc7b54-4df3-4bca-a65a-3da1ecc777f0" || d.Key != KeyID {
		t.Fatalf("the vector: %+v, %v", d, err)
	}
	if _, err := v.Verify(Request{Header: h, Body: []byte(strings.Replace(body, "answered", "hangup", 1))}, now); !errors.Is(err, ErrBadSignature) {
		t.Errorf("another body: %v, want ErrBadSignature", err)
	}
	seed, _ := hex.DecodeString("4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb")
	der, err := x509.MarshalPKCS8PrivateKey(ed25519.NewKeyFromSeed(seed))
	if err != nil {
		t.Fatal(err)
	}
	signer := mustNew(t, "telnyx", []string{string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))}, Options{})
	if signed := signer.Sign("", time.Unix(1700000000, 0), []byte(body)); signed.Get("Telnyx-Signature-Ed25519") != sig {
		t.Errorf("signed %v, want the vector's signature", signed)
	}
}
