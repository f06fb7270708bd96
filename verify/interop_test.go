package verify

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stripe/stripe-go/v85/webhook"
	svix "github.com/svix/svix-webhooks/go"
)

// TestInteropStandardEntries: within one webhook-signature header, entries
// the Standard Webhooks and Svix reference libraries skip are skipped, and
// the request verifies on another entry. Each header is judged by both
// libraries too: they accept exactly what hookgate accepts. Only a header
// with no usable entry is malformed (the libraries reject it as well).
func TestInteropStandardEntries(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	body := []byte(`{"type":"reservation.confirmed","reservation_id":"r-42"}`)
	now := time.Now() // the libraries read the wall clock
	swh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	sv, err := svix.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	valid, err := swh.Sign("msg_interop", now, body)
	if err != nil {
		t.Fatal(err)
	}
	const otherV1a = "v1a,tQ9V2XOqn7jL/DQenEFpqIugdBVtiMmER5mhSkXBNwM0mkATuDe6KYYUuxqtaiHeYGb7KaaBRdM5WqyeFiL8Ag=="
	tests := []struct {
		name, sig string
		want      error
	}{
		{"double space", "v1,AAAA  " + valid, nil},
		{"leading and trailing spaces", "  " + valid + "  ", nil},
		{"unknown versions", "v2,xyz v0,abc " + valid + " v1b,zzz", nil},
		{"undecodable entry before", "v1,%%% " + valid, nil},
		{"undecodable entry after", valid + " v1,not*base64", nil},
		{"entry without a comma", "garbage " + valid, nil},
		{"empty version", ",AAAA " + valid, nil},
		{"v1a without an Ed25519 key", "v1a,abc " + valid, nil},
		{"well-formed v1a without an Ed25519 key", otherV1a + " " + valid, nil},
		{"all unusable", "v1,%%% v2,abc  garbage v1a,AAAA", ErrMalformedHeader},
		{"usable but wrong", "v1,%%% v1,AAAA", ErrBadSignature},
	}
	v := mustNew(t, "standard", []string{secret}, Options{})
	for _, tt := range tests {
		for _, prefix := range []string{"Webhook-", "Svix-"} {
			t.Run(tt.name+"/"+prefix, func(t *testing.T) {
				h := http.Header{}
				h.Set(prefix+"Id", "msg_interop")
				h.Set(prefix+"Timestamp", strconv.FormatInt(now.Unix(), 10))
				h.Set(prefix+"Signature", tt.sig)
				_, err := v.Verify(Request{Header: h, Body: body}, now)
				if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
					t.Fatalf("%q: err = %v, want %v", tt.sig, err, tt.want)
				}
				libs := map[string]func([]byte, http.Header) error{"svix": sv.Verify}
				if prefix == "Webhook-" { // standard-webhooks reads no svix-* header
					libs["standard-webhooks"] = swh.Verify
				}
				for lib, verify := range libs {
					if libErr := verify(body, h); (libErr == nil) != (err == nil) {
						t.Errorf("%s: the library says %v, hookgate %v", lib, libErr, err)
					}
				}
			})
		}
	}

	// With an Ed25519 key, v1a entries are checked: a v1a entry is then
	// usable, and a bad one is a bad signature, not a malformed header.
	both := mustNew(t, "standard", []string{secret, "whpk_" + v1aPublicKey(t)}, Options{})
	h := http.Header{}
	h.Set("Webhook-Id", "msg_interop")
	h.Set("Webhook-Timestamp", strconv.FormatInt(now.Unix(), 10))
	h.Set("Webhook-Signature", "v1,%%% "+otherV1a)
	if _, err := both.Verify(Request{Header: h, Body: body}, now); !errors.Is(err, ErrBadSignature) {
		t.Errorf("a v1a entry of another message, with an Ed25519 key: err = %v, want ErrBadSignature", err)
	}
}

// TestInteropStripeEntries: within Stripe-Signature, items Stripe's
// libraries skip are skipped. stripe-go judges each header too where it
// reads it: it refuses an item without "=" (an empty item is one), which
// Stripe's Node, Python and Ruby libraries skip; hookgate skips it, so that
// no sender built on any of them is refused.
func TestInteropStripeEntries(t *testing.T) {
	const secret = "whsec_test_interop"
	body := []byte(`{"id":"evt_interop","type":"invoice.paid"}`)
	now := time.Now()
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: now})
	ts, v1, ok := strings.Cut(signed.Header, ",")
	if !ok || !strings.HasPrefix(v1, "v1=") {
		t.Fatalf("stripe-go's header %q is not t=...,v1=...", signed.Header)
	}
	tests := []struct {
		name, sig string
		want      error
		stripeGo  bool // whether stripe-go reads the header (true: it must agree)
	}{
		{"undecodable v1 before", ts + ",v1=zz," + v1, nil, true},
		{"odd-length v1 after", ts + "," + v1 + ",v1=abc", nil, true},
		{"unknown versions", ts + ",v0=63f3a723,v9=x," + v1, nil, true},
		{"empty item", ts + ",," + v1, nil, false},
		{"item without =", ts + ",junk," + v1, nil, false},
		{"spaces around items", ts + ", " + v1 + " ", nil, false},
		{"all unusable", ts + ",v1=zz,v0=abc", ErrMalformedHeader, true},
		{"usable but wrong", ts + ",v1=zz,v1=00ff", ErrBadSignature, true},
		{"no t=", v1, ErrMalformedHeader, false},
	}
	v := mustNew(t, "stripe", []string{secret}, Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			h.Set("Stripe-Signature", tt.sig)
			_, err := v.Verify(Request{Header: h, Body: body}, now)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("%q: err = %v, want %v", tt.sig, err, tt.want)
			}
			if libErr := webhook.ValidatePayload(body, tt.sig, secret); tt.stripeGo && (libErr == nil) != (err == nil) {
				t.Errorf("stripe-go says %v, hookgate %v", libErr, err)
			}
		})
	}
}

func v1aPublicKey(t *testing.T) string {
	t.Helper()
	signer := mustNew(t, "standard", []string{"whsk_" + v1aSeed}, Options{})
	return base64.StdEncoding.EncodeToString(signer.publics[0])
}
