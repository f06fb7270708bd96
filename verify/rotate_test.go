package verify

import (
	"net/http"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	svix "github.com/svix/svix-webhooks/go"
)

// TestCosign: during a rotation, a request signed with the new secret
// and cosigned with the old one verifies under either secret alone:
// through svix's and standard-webhooks' own verifiers, and through
// hookgate's for every scheme that carries several signatures; a scheme
// that carries one keeps the new signature only.
func TestCosign(t *testing.T) {
	body := []byte(`{"type":"seat.released","id":"evt_1"}`)
	const oldSecret, newSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_c2Vjb25kIHNlY3JldCBmb3Igcm90YXRpb24="
	at := t0
	sign := func(scheme, secret string) http.Header {
		s, err := NewSigner(scheme, secret, "")
		if err != nil {
			t.Fatal(err)
		}
		h, err := s.SignRequest(Request{Body: body}, "msg_1", at)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	for _, scheme := range []string{"standard", "stripe", "paddle", "polar", "mux", "github", "shopify"} {
		if scheme == "standard" {
			at = time.Now() // svix's and standard-webhooks' verifiers read the clock
		}
		newer, _ := NewSigner(scheme, newSecret, "")
		h := sign(scheme, newSecret)
		cosigned := newer.Cosign(h, sign(scheme, oldSecret))
		if cosigned != newer.CarriesSeveral() || cosigned != (scheme != "github" && scheme != "shopify") {
			t.Errorf("%s: cosigned %v, carries several %v", scheme, cosigned, newer.CarriesSeveral())
		}
		for _, secret := range []string{oldSecret, newSecret} {
			v := mustNew(t, scheme, []string{secret}, Options{})
			_, err := v.Verify(Request{Header: h, Body: body}, at)
			if want := cosigned || secret == newSecret; (err == nil) != want {
				t.Errorf("%s: verified under the %s secret: %v, want %v", scheme, map[bool]string{true: "old", false: "new"}[secret == oldSecret], err, want)
			}
		}
		if scheme != "standard" {
			continue
		}
		for _, secret := range []string{oldSecret, newSecret, "whsec_dGhpcmQgc2VjcmV0LCBuZXZlciB1c2Vk"} {
			want := secret != "whsec_dGhpcmQgc2VjcmV0LCBuZXZlciB1c2Vk"
			sv, err := svix.NewWebhook(secret)
			if err != nil {
				t.Fatal(err)
			}
			if err := sv.Verify(body, h); (err == nil) != want {
				t.Errorf("svix's verifier under one secret: %v, want accepted %v", err, want)
			}
			swh, err := standardwebhooks.NewWebhook(secret)
			if err != nil {
				t.Fatal(err)
			}
			if err := swh.Verify(body, h); (err == nil) != want {
				t.Errorf("standard-webhooks' verifier under one secret: %v, want accepted %v", err, want)
			}
		}
	}
}
